#include "ringtrain/dist/ring_allreduce.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

namespace {
thread_local PollMode g_poll_mode = PollMode::Spin;
thread_local const std::atomic<bool>* g_spin_while = nullptr;
// Called between two MPI_Test* of one wait: yields the core, except during an adaptive wait's first 50 us.
class Pause {
 public:
  void operator()() {
    const bool adaptive = g_poll_mode == PollMode::Adaptive ||
                          (g_spin_while && g_spin_while->load(std::memory_order_relaxed));
    if (adaptive && std::chrono::steady_clock::now() - start_ < std::chrono::microseconds(50)) return;
    sched_yield();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

void set_thread_poll_mode(PollMode mode, const std::atomic<bool>* spin_while) {
  g_poll_mode = mode;
  g_spin_while = spin_while;
}
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

template <typename T>
void RingAllreduce::run_typed(T* data, std::size_t n, MPI_Datatype type) {
  const int W = size_, r = rank_;
  if (W == 1 || n == 0) return;
  const std::size_t S = std::max<std::size_t>(1, opt_.segment_bytes / sizeof(T));  // elements a segment
  const std::size_t max_chunk = (n + W - 1) / W;
  const int K = int((max_chunk + S - 1) / S);  // most segments in a chunk
  check(K <= 32767, "ring all-reduce: too many segments for MPI tags; raise the segment size");
  if (scratch_.size() < max_chunk * sizeof(T)) scratch_.resize(max_chunk * sizeof(T));
  T* tmp = reinterpret_cast<T*>(scratch_.data());

  const int steps = 2 * (W - 1);
  const int right = (r + 1) % W, left = (r + W - 1) % W;
  sends_.assign(std::size_t(steps) * K, MPI_REQUEST_NULL);
  recvs_.assign(std::size_t(steps) * K, MPI_REQUEST_NULL);
  posted_.assign(std::size_t(steps) * K, 0);

  auto mod = [W](int x) { return ((x % W) + W) % W; };
  // Step t < W-1 is reduce-scatter step t, t >= W-1 is all-gather step t-(W-1).
  auto recv_chunk = [&](int t) { return t < W - 1 ? mod(r - t - 1) : mod(r - (t - (W - 1))); };
  // What a rank sends in step t is what it received (and, in reduce-scatter, reduced) in step t-1.
  auto send_chunk = [&](int t) { return t == 0 ? r : recv_chunk(t - 1); };
  auto segments = [&](int c) {
    std::size_t len = ring_chunk_begin(n, W, c + 1) - ring_chunk_begin(n, W, c);
    return int((len + S - 1) / S);
  };
  auto segment = [&](int c, int k, std::size_t& len) {
    std::size_t b = ring_chunk_begin(n, W, c) + std::size_t(k) * S;
    len = std::min(S, ring_chunk_begin(n, W, c + 1) - b);
    return b;
  };
  // Tag = segment index: for one tag, the sender sends steps in order and the receiver posts them in
  // order, so MPI's non-overtaking rule matches each message to its step.
  auto post_send = [&](int t, int k) {
    std::size_t len;
    std::size_t b = segment(send_chunk(t), k, len);
    MPI_Isend(data + b, int(len), type, right, k, comm_, &sends_[std::size_t(t) * K + k]);
  };
  auto post_recv = [&](int t, int k) {
    std::size_t len;
    std::size_t b = segment(recv_chunk(t), k, len);
    T* dst = data + b;
    if (t < W - 1) {
      dst = tmp + std::size_t(k) * S;
    } else {
      // All-gather writes in place into the chunk this rank sent in reduce-scatter step t-(W-1):
      // that send must be complete first.
      wait_request(&sends_[std::size_t(t - (W - 1)) * K + k]);
    }
    MPI_Irecv(dst, int(len), type, left, k, comm_, &recvs_[std::size_t(t) * K + k]);
    posted_[std::size_t(t) * K + k] = 1;
  };

  for (int k = 0, ns = segments(send_chunk(0)); k < ns; ++k) post_send(0, k);
  for (int t = 0; t < steps; ++t) {
    const int c = recv_chunk(t), ns = segments(c);
    for (int k = 0; k < ns; ++k)
      if (!posted_[std::size_t(t) * K + k]) post_recv(t, k);
    const int next_ns = t + 1 < steps ? segments(recv_chunk(t + 1)) : 0;
    for (int done = 0; done < ns; ++done) {
      const int k = wait_any(ns, &recvs_[std::size_t(t) * K]);
      check(k != MPI_UNDEFINED, "ring all-reduce: internal error (no request to wait for)");
      if (t < W - 1) {
        std::size_t len;
        std::size_t b = segment(c, k, len);
        T* __restrict dst = data + b;
        const T* __restrict src = tmp + std::size_t(k) * S;
        for (std::size_t i = 0; i < len; ++i) dst[i] += src[i];
      }
      if (t + 1 < steps) {
        post_send(t + 1, k);  // forward the segment at once: this is the pipelining
        if (k < next_ns) {
          if (t + 1 < W - 1) {
            post_recv(t + 1, k);  // its scratch slot is free again
          } else {
            int flag = 0;
            MPI_Test(&sends_[std::size_t(t + 1 - (W - 1)) * K + k], &flag, MPI_STATUS_IGNORE);
            if (flag) post_recv(t + 1, k);
          }
        }
      }
    }
  }
  wait_all(int(sends_.size()), sends_.data());
}

template void RingAllreduce::run_typed<float>(float*, std::size_t, MPI_Datatype);
template void RingAllreduce::run_typed<double>(double*, std::size_t, MPI_Datatype);
template void RingAllreduce::run_typed<int64_t>(int64_t*, std::size_t, MPI_Datatype);

}  // namespace ringtrain::dist
