#include "ringtrain/dist/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::vector<Bucket> make_buckets(const nn::ParameterSet& params, std::size_t bucket_bytes) {
  const auto& views = params.views();
  check(!views.empty(), "grad reducer: the model has no parameters");
  std::vector<Bucket> buckets;
  const std::size_t end_of_buffer = params.size();
  std::size_t end = end_of_buffer;  // the current bucket is [offset of its first view, end)
  int last = int(views.size()) - 1;
  for (int v = int(views.size()) - 1; v >= 0; --v) {
    std::size_t begin = views[v].offset;
    if ((end - begin) * sizeof(float) >= bucket_bytes || v == 0) {
      buckets.push_back({begin, end - begin, v, last});
      end = begin;
      last = v - 1;
    }
  }
  return buckets;
}

GradReducer::GradReducer(nn::ParameterSet& params, Communicator& comm, const GradReducerOptions& opt)
    : params_(params), opt_(opt), world_(comm.size()) {
  buckets_ = make_buckets(params_, opt_.bucket_bytes);
  view_bucket_.assign(params_.views().size(), -1);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (int v = buckets_[b].first_view; v <= buckets_[b].last_view; ++v) view_bucket_[v] = int(b);
  ready_.reserve(buckets_.size());
  begin_step();
  if (world_ > 1) {
    comm_ = comm.duplicate();
    std::size_t largest = 0;
    for (const Bucket& b : buckets_) largest = std::max(largest, b.count);
    std::vector<float> warm_up(largest, 0.0f);
    comm_->allreduce_sum(warm_up.data(), warm_up.size());
    warmed_up_ = comm_->traffic();
    if (opt_.progress_interval_s > 0) progress_ = std::thread([this] { progress_loop(); });
  }
}

GradReducer::~GradReducer() {
  if (!progress_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_one();
  progress_.join();
}

void GradReducer::progress_loop() {
  const auto interval = std::chrono::duration<double>(opt_.progress_interval_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (in_flight_ < 0 && next_ready_ == ready_.size()) {  // nothing in flight or queued: sleep until there is
      work_.wait(lock);
      continue;
    }
    // Test (and start the next queued bucket), then let the compute thread have the core.
    if (in_flight_ >= 0 && comm_->test_allreduce()) finish_in_flight();
    if (in_flight_ < 0 && next_ready_ < ready_.size()) {
      start(ready_[next_ready_++]);
      comm_->test_allreduce();
    }
    lock.unlock();
    std::this_thread::sleep_for(interval);
    lock.lock();
  }
}

void GradReducer::count_traffic() {
  const Communicator::Traffic now = comm_->traffic();
  stats_.bytes_sent = now.bytes_sent - warmed_up_.bytes_sent;
  stats_.library_sums = now.library_sums - warmed_up_.library_sums;
}

void GradReducer::begin_step() {
  pending_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].last_view - buckets_[b].first_view + 1;
  view_ready_.assign(params_.views().size(), 0);
  started_.assign(buckets_.size(), 0);
  ready_.clear();
  next_ready_ = 0;
}

void GradReducer::on_grads_ready(const nn::Layer& layer) {
  if (world_ == 1 || !opt_.overlap) return;
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (progress_.joinable()) lock.lock();
  const std::size_t queued = ready_.size();
  for (int v : layer.param_indices()) {
    check(v >= 0 && v < int(view_ready_.size()), "grad reducer: layer " + layer.name() + " reports an unknown parameter");
    check(!view_ready_[v], "grad reducer: " + params_.views()[v].name + " reported twice in one step");
    view_ready_[v] = 1;
    const int b = view_bucket_[v];
    if (--pending_[b] == 0) ready_.push_back(b);
  }
  if (progress_.joinable()) {  // the thread moves the communication; wake it for a new bucket
    if (ready_.size() != queued) work_.notify_one();
    return;
  }
  pump();
}

void GradReducer::start(int b) {
  started_[b] = 1;
  in_flight_ = b;
  float* g = params_.grads() + buckets_[b].offset;
  if (sharded()) comm_->start_reduce_scatter_sum(g, buckets_[b].count);
  else comm_->start_allreduce_sum(g, buckets_[b].count);
}

void GradReducer::finish_in_flight() {
  comm_->wait_allreduce();
  average(in_flight_);
  in_flight_ = -1;
}

void GradReducer::average(int b) {
  // A multiply (a third of a divide's cost here); the same bits as sum / W when W is a power of two.
  // Shard mode: only this rank's slice holds the sum.
  const Communicator::Range r = sharded() ? comm_->shard_chunk(buckets_[b].count) : Communicator::Range{0, buckets_[b].count};
  float* g = params_.grads() + buckets_[b].offset;
  const float inv_w = 1.0f / float(world_);
  for (std::size_t i = r.begin; i < r.end; ++i) g[i] *= inv_w;
}

std::vector<optim::Span> GradReducer::shard_spans() const {
  if (!sharded()) return {{0, params_.size()}};
  std::vector<optim::Span> spans;
  for (const Bucket& b : buckets_) {
    const Communicator::Range r = comm_->shard_chunk(b.count);
    spans.push_back({b.offset + r.begin, r.end - r.begin});
  }
  return spans;
}

void GradReducer::all_gather(float* buf) {
  if (!sharded()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = std::chrono::steady_clock::now();
  ScopedPollMode mode(PollMode::Adaptive);
  for (const Bucket& b : buckets_) {
    comm_->start_all_gather(buf + b.offset, b.count);
    comm_->wait_allreduce();
  }
  stats_.gather_s += seconds_since(t0);
  count_traffic();
}

void GradReducer::pump() {
  if (in_flight_ < 0 && next_ready_ == ready_.size()) return;  // nothing in flight, nothing queued
  auto t0 = std::chrono::steady_clock::now();
  // One test, then start the next bucket if the one in flight is done: a layer boundary costs a few
  // microseconds at most (a test that finds nothing is ~0.1 us).
  if (in_flight_ >= 0 && comm_->test_allreduce()) finish_in_flight();  // complete: its wait returns at once
  if (in_flight_ < 0 && next_ready_ < ready_.size()) {
    start(ready_[next_ready_++]);
    comm_->test_allreduce();  // hands the first messages to the peers now
  }
  stats_.comm_s += seconds_since(t0);
}

double GradReducer::wait() {
  auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);  // the progress thread (if any) stays out until the step is done
  if (world_ > 1) {
    // Nothing else to do now: an adaptive wait (spins briefly, then yields, so a late peer or a busy
    // machine does not cost a held core).
    ScopedPollMode mode(PollMode::Adaptive);
    if (in_flight_ >= 0) finish_in_flight();
    // Then the queued buckets in the order they became ready, then those never reported (or every
    // bucket, with overlap off) in bucket order: the same order on every rank.
    for (; next_ready_ < ready_.size(); ++next_ready_) {
      start(ready_[next_ready_]);
      finish_in_flight();
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      if (started_[b]) continue;
      start(int(b));
      finish_in_flight();
    }
    begin_step();
    count_traffic();
  }
  double waited = seconds_since(t0);
  stats_.steps += 1;
  stats_.wait_s += waited;
  stats_.comm_s += waited;
  stats_.last_wait_s = waited;
  return waited;
}

}  // namespace ringtrain::dist
