#include "ringtrain/dist/ring_allreduce.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

namespace {
thread_local PollMode g_poll_mode = PollMode::Spin;
// Called between two MPI_Test* of one wait: yields the core, except during an adaptive wait's first 50 us.
class Pause {
 public:
  void operator()() {
    if (g_poll_mode == PollMode::Adaptive && std::chrono::steady_clock::now() - start_ < std::chrono::microseconds(50))
      return;
    sched_yield();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

void set_thread_poll_mode(PollMode mode) { g_poll_mode = mode; }
PollMode thread_poll_mode() { return g_poll_mode; }

void wait_request(MPI_Request* r) {
  if (g_poll_mode == PollMode::Spin) {
    MPI_Wait(r, MPI_STATUS_IGNORE);
    return;
  }
  Pause pause;
  for (int flag = 0;;) {
    MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (flag) return;
    pause();
  }
}

int wait_any(int n, MPI_Request* r) {
  int k = MPI_UNDEFINED;
  if (g_poll_mode == PollMode::Spin) {
    MPI_Waitany(n, r, &k, MPI_STATUS_IGNORE);
    return k;
  }
  Pause pause;
  for (int flag = 0;;) {
    MPI_Testany(n, r, &k, &flag, MPI_STATUS_IGNORE);
    if (flag) return k;  // MPI_UNDEFINED when every request is null
    pause();
  }
}

void wait_all(int n, MPI_Request* r) {
  if (g_poll_mode == PollMode::Spin) {
    MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
    return;
  }
  Pause pause;
  for (int flag = 0;;) {
    MPI_Testall(n, r, &flag, MPI_STATUSES_IGNORE);
    if (flag) return;
    pause();
  }
}

int ring_fold_start(std::size_t n, int W, std::size_t i) {
  // Chunk c holds i when begin(c) <= i < begin(c+1); begin is monotone, so search.
  int lo = 0, hi = W - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (ring_chunk_begin(n, W, mid) <= i) lo = mid; else hi = mid - 1;
  }
  return lo;
}

RingAllreduce::RingAllreduce(MPI_Comm comm, const RingOptions& opt) : comm_(comm), opt_(opt) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  check(opt_.segment_bytes > 0, "ring all-reduce: segment size must be positive");
}

int RingAllreduce::recv_chunk(int t) const {
  const int W = size_, r = rank_;
  const int c = t < W - 1 ? r - t - 1 : r - (t - (W - 1));
  return ((c % W) + W) % W;
}

int RingAllreduce::segments(int chunk) const {
  const std::size_t len = ring_chunk_begin(n_, size_, chunk + 1) - ring_chunk_begin(n_, size_, chunk);
  return int((len + S_ - 1) / S_);
}

std::size_t RingAllreduce::segment(int chunk, int k, std::size_t& len) const {
  const std::size_t b = ring_chunk_begin(n_, size_, chunk) + std::size_t(k) * S_;
  len = std::min(S_, ring_chunk_begin(n_, size_, chunk + 1) - b);
  return b;
}

// Tag = segment index: for one tag, the sender sends steps in order and the receiver posts them in
// order, so MPI's non-overtaking rule matches each message to its step.
void RingAllreduce::post_send(int t, int k) {
  std::size_t len;
  const std::size_t b = segment(send_chunk(t), k, len);
  bytes_sent_ += len * elem_;
  MPI_Isend(data_ + b * elem_, int(len), type_, (rank_ + 1) % size_, k, comm_, &sends_[std::size_t(t) * K_ + k]);
}

void RingAllreduce::post_recv(int t, int k) {
  std::size_t len;
  const std::size_t b = segment(recv_chunk(t), k, len);
  // Reduce-scatter receives into scratch (added on arrival); all-gather straight into place.
  unsigned char* dst = t < size_ - 1 ? scratch_.data() + std::size_t(k) * S_ * elem_ : data_ + b * elem_;
  MPI_Irecv(dst, int(len), type_, (rank_ + size_ - 1) % size_, k, comm_, &recvs_[std::size_t(t) * K_ + k]);
  posted_[std::size_t(t) * K_ + k] = 1;
}

bool RingAllreduce::earlier_send_done(int t, int k, bool block) {
  if (t < size_ - 1) return true;
  MPI_Request* r = &sends_[std::size_t(t - (size_ - 1)) * K_ + k];
  if (block) {
    wait_request(r);
    return true;
  }
  int flag = 0;
  MPI_Test(r, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

void RingAllreduce::on_received(int t, int k) {
  if (t < size_ - 1) {
    std::size_t len;
    const std::size_t b = segment(recv_chunk(t), k, len);
    add_(data_ + b * elem_, scratch_.data() + std::size_t(k) * S_ * elem_, len);
  }
  if (t + 1 >= steps_) return;
  post_send(t + 1, k);  // forward the segment at once: this is the pipelining
  if (k < segments(recv_chunk(t + 1)) && earlier_send_done(t + 1, k, false)) post_recv(t + 1, k);
}

void RingAllreduce::start_typed(void* data, std::size_t n, MPI_Datatype type, std::size_t elem, AddFn add,
                                RingPhase phase) {
  check(!active_, "ring all-reduce: a second operation started before the first finished");
  const int W = size_;
  if (W == 1 || n == 0) return;
  data_ = static_cast<unsigned char*>(data);
  n_ = n;
  elem_ = elem;
  type_ = type;
  add_ = add;
  S_ = std::max<std::size_t>(1, opt_.segment_bytes / elem);
  const std::size_t max_chunk = (n + W - 1) / W;
  K_ = int((max_chunk + S_ - 1) / S_);  // most segments in a chunk
  check(K_ <= 32767, "ring all-reduce: too many segments for MPI tags; raise the segment size");
  if (scratch_.size() < max_chunk * elem) scratch_.resize(max_chunk * elem);
  // Requests are indexed by step over the whole schedule; an all-gather alone starts at step W-1 (its
  // "earlier sends" of the reduce-scatter are then null requests, complete at once).
  const int all_steps = 2 * (W - 1);
  sends_.assign(std::size_t(all_steps) * K_, MPI_REQUEST_NULL);
  recvs_.assign(std::size_t(all_steps) * K_, MPI_REQUEST_NULL);
  posted_.assign(std::size_t(all_steps) * K_, 0);
  step_ = phase == RingPhase::AllGather ? W - 1 : 0;
  steps_ = phase == RingPhase::ReduceScatter ? W - 1 : all_steps;
  done_in_step_ = 0;
  active_ = true;
  for (int k = 0, ns = segments(send_chunk(step_)); k < ns; ++k) post_send(step_, k);
  for (int k = 0, ns = segments(recv_chunk(step_)); k < ns; ++k) post_recv(step_, k);
}

bool RingAllreduce::advance(bool block) {
  if (!active_) return true;
  while (step_ < steps_) {
    const int t = step_, ns = segments(recv_chunk(t));
    for (int k = 0; k < ns; ++k)
      if (!posted_[std::size_t(t) * K_ + k] && earlier_send_done(t, k, block)) post_recv(t, k);
    MPI_Request* recvs = &recvs_[std::size_t(t) * K_];
    while (done_in_step_ < ns) {
      int k = MPI_UNDEFINED;
      if (block) {
        k = wait_any(ns, recvs);
        check(k != MPI_UNDEFINED, "ring all-reduce: internal error (no request to wait for)");
      } else {
        int flag = 0;
        MPI_Testany(ns, recvs, &k, &flag, MPI_STATUS_IGNORE);
        if (!flag || k == MPI_UNDEFINED) return false;  // nothing arrived (or not all receives posted yet)
      }
      on_received(t, k);
      ++done_in_step_;
    }
    ++step_;
    done_in_step_ = 0;
  }
  if (block) {
    wait_all(int(sends_.size()), sends_.data());
  } else {
    int flag = 0;
    MPI_Testall(int(sends_.size()), sends_.data(), &flag, MPI_STATUSES_IGNORE);
    if (!flag) return false;
  }
  active_ = false;
  return true;
}

}  // namespace ringtrain::dist
