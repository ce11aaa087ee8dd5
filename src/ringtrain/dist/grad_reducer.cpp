#include "ringtrain/dist/grad_reducer.h"

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
  pending_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].last_view - buckets_[b].first_view + 1;
  view_ready_.assign(params_.views().size(), 0);
  launched_.assign(buckets_.size(), 0);
  queue_.reserve(buckets_.size());
  if (world_ > 1) {
    comm_ = comm.duplicate();
    if (opt_.overlap) thread_ = std::thread([this] { comm_loop(); });
  }
}

GradReducer::~GradReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GradReducer::on_grads_ready(const nn::Layer& layer) {
  if (world_ == 1 || !opt_.overlap) return;
  for (int v : layer.param_indices()) {
    check(v >= 0 && v < int(view_ready_.size()), "grad reducer: layer " + layer.name() + " reports an unknown parameter");
    check(!view_ready_[v], "grad reducer: " + params_.views()[v].name + " reported twice in one step");
    view_ready_[v] = 1;
    int b = view_bucket_[v];
    // The last bucket completes at the very end of backward: nothing is left to overlap it with, so wait()
    // reduces it on this thread (handing it to the communication thread would add two thread switches).
    if (--pending_[b] == 0 && b + 1 < int(buckets_.size())) launch(b);
  }
}

void GradReducer::launch(int b) {
  launched_[b] = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(b);
  }
  cv_work_.notify_one();
}

void GradReducer::reduce(int b) {
  float* g = params_.grads() + buckets_[b].offset;
  const std::size_t n = buckets_[b].count;
  comm_->allreduce_sum(g, n);
  const float w = float(world_);
  for (std::size_t i = 0; i < n; ++i) g[i] /= w;
}

void GradReducer::comm_loop() {
  set_thread_poll_mode(opt_.poll, &main_waiting_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_work_.wait(lock, [this] { return stop_ || (!main_takes_over_ && queue_head_ < queue_.size()); });
    if (stop_) return;
    int b = queue_[queue_head_++];
    busy_ = true;
    lock.unlock();
    auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr err;
    try {
      reduce(b);
    } catch (...) {
      err = std::current_exception();
    }
    double t = seconds_since(t0);
    lock.lock();
    comm_s_thread_ += t;
    if (err && !error_) error_ = err;
    ++done_;
    busy_ = false;
    cv_done_.notify_all();
  }
}

void GradReducer::reduce_here(bool only_unlaunched) {
  // In bucket order. This thread has nothing else to do meanwhile: an adaptive wait (spins briefly, then
  // yields, so a late peer or a busy machine does not cost a held core).
  const PollMode saved = thread_poll_mode();
  set_thread_poll_mode(PollMode::Adaptive);
  auto t0 = std::chrono::steady_clock::now();
  try {
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      if (!only_unlaunched || !launched_[b]) reduce(int(b));
  } catch (...) {
    set_thread_poll_mode(saved);
    throw;
  }
  set_thread_poll_mode(saved);
  stats_.comm_s += seconds_since(t0);
}

double GradReducer::wait() {
  auto t0 = std::chrono::steady_clock::now();
  if (world_ > 1) {
    if (opt_.overlap) {
      // The communication thread finishes the bucket it is in (its communicator must be idle before this
      // thread uses it) and takes no more; this thread then reduces what it had not started, in queue
      // order, and the buckets never launched, in bucket order. Every rank issues the same buckets in the
      // same order, whichever thread runs them, so the collectives match. (When the communication thread
      // got no CPU during backward, this is --no-overlap's work with no thread switch added.)
      std::exception_ptr err;
      std::size_t first_left = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        main_takes_over_ = true;
        main_waiting_.store(true, std::memory_order_relaxed);  // backward is over: the core is the comm thread's
        cv_done_.wait(lock, [this] { return !busy_; });
        main_waiting_.store(false, std::memory_order_relaxed);
        stats_.comm_s += comm_s_thread_;
        comm_s_thread_ = 0;
        first_left = queue_head_;
        std::swap(err, error_);
      }
      if (err) {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.clear();
        queue_head_ = 0;
        done_ = 0;
        main_takes_over_ = false;
        std::rethrow_exception(err);
      }
      // queue_ is not touched by the communication thread while main_takes_over_ is set.
      const PollMode saved = thread_poll_mode();
      set_thread_poll_mode(PollMode::Adaptive);
      auto t_inline = std::chrono::steady_clock::now();
      for (std::size_t i = first_left; i < queue_.size(); ++i) reduce(queue_[i]);
      set_thread_poll_mode(saved);
      stats_.comm_s += seconds_since(t_inline);
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.clear();
        queue_head_ = 0;
        done_ = 0;
        main_takes_over_ = false;
      }
      reduce_here(true);
    } else {
      reduce_here(false);  // the same buckets, in the same order, after backward
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      pending_[b] = buckets_[b].last_view - buckets_[b].first_view + 1;
      launched_[b] = 0;
    }
    std::fill(view_ready_.begin(), view_ready_.end(), 0);
  }
  double waited = seconds_since(t0);
  stats_.steps += 1;
  stats_.wait_s += waited;
  stats_.last_wait_s = waited;
  return waited;
}

}  // namespace ringtrain::dist
