// Our own ring all-reduce over MPI point-to-point (the algorithm of Baidu's ring / Horovod / NCCL).
// The buffer of n elements is cut into W chunks (chunk c = [c*n/W, (c+1)*n/W), so any n works, even
// n < W); reduce-scatter then all-gather around the ring rank r -> r+1 in 2(W-1) steps, each moving one
// chunk (~n/W elements). Chunks are further cut into segments of segment_bytes, and a segment is
// forwarded to the next step as soon as it has been reduced, so sending, receiving and adding overlap
// (pipelining) and large buffers run at link speed.
//
// Every rank ends with bit-identical results: element i of chunk c is the left fold
// ((x_c + x_{c+1}) + x_{c+2}) + ... over ranks c, c+1, ..., c+W-1 (mod W) - a fixed order, which the
// tests reproduce exactly (ring_fold_start).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringtrain/core/aligned.h"

namespace ringtrain::dist {

// First element of chunk c (0 <= c <= W) of a buffer of n elements split over W ranks.
inline std::size_t ring_chunk_begin(std::size_t n, int W, int c) {
  return std::size_t((unsigned __int128)n * unsigned(c) / unsigned(W));
}
// The rank whose value starts element i's fixed-order sum (the owner of i's chunk).
int ring_fold_start(std::size_t n, int W, std::size_t i);
// The chunk rank r holds fully summed after the reduce-scatter phase (the last chunk it received):
// (r + 1) mod W. What optimizer-state sharding (ZeRO-1) updates on rank r.
inline int ring_reduced_chunk(int rank, int W) { return (rank + 1) % W; }

// The ring's two halves, for optimizer-state sharding: ReduceScatter runs only the first W-1 steps (rank
// r ends with chunk ring_reduced_chunk(r, W) summed, bit for bit what the whole all-reduce leaves there;
// the other chunks hold partial sums), AllGather only the last W-1 (every rank's chunk
// ring_reduced_chunk(r, W) copied to all). AllReduce is both.
enum class RingPhase { AllReduce, ReduceScatter, AllGather };

// How the calling thread waits for messages. Spin: MPI_Wait* (Open MPI busy-polls: lowest latency, but
// the thread holds its core however long it waits). Yield: MPI_Test* then sched_yield(), for a wait that
// may be long while other work could use the core (the tensor-parallel group's all-reduce, TensorGroupComm).
// Adaptive: MPI_Test* spinning for the first 50 us of a wait, then yielding between tests (a short wait
// costs no switch; a long one - a late peer, an oversubscribed or busy machine - does not hold the core;
// the GradReducer's wait()). Per thread; default Spin.
enum class PollMode { Spin, Yield, Adaptive };
void set_thread_poll_mode(PollMode mode);
PollMode thread_poll_mode();
// Sets the calling thread's poll mode for a scope and restores the previous one, also when unwinding.
class ScopedPollMode {
 public:
  explicit ScopedPollMode(PollMode mode) : saved_(thread_poll_mode()) { set_thread_poll_mode(mode); }
  ~ScopedPollMode() { set_thread_poll_mode(saved_); }
  ScopedPollMode(const ScopedPollMode&) = delete;
  ScopedPollMode& operator=(const ScopedPollMode&) = delete;

 private:
  PollMode saved_;
};
// Waits for one request / any of n / all of n in the calling thread's poll mode.
void wait_request(MPI_Request* r);
int wait_any(int n, MPI_Request* r);
void wait_all(int n, MPI_Request* r);

struct RingOptions {
  // Pipelining grain. 512 KiB measured best on shared memory with MpiSession's copy-in/copy-out
  // settings (bench/allreduce.sh: ring / MPI_Allreduce at 4 MiB 0.91 with 256 KiB, 0.96-0.98 with 512 KiB).
  std::size_t segment_bytes = std::size_t(512) << 10;
};

class RingAllreduce {
 public:
  // comm is borrowed (not freed); one RingAllreduce must be used by one thread at a time.
  RingAllreduce(MPI_Comm comm, const RingOptions& opt = {});
  // In-place sum over the ranks of comm (start + finish).
  void run(float* data, std::size_t n) { start(data, n); finish(); }
  void run(double* data, std::size_t n) { start(data, n); finish(); }
  void run(int64_t* data, std::size_t n) { start(data, n); finish(); }

  // The same sum, resumable: start() posts the first step and returns at once; progress() does whatever
  // has arrived (receives, adds, forwards) without ever blocking and says whether the sum is complete;
  // finish() blocks until it is. One operation at a time per object; the caller keeps `data` untouched
  // until it is complete. The result bits do not depend on how the work was split between calls.
  // (The GradReducer calls progress() between backward's layers, so one core both computes and
  // communicates: Open MPI moves data only inside MPI calls.)
  void start(float* data, std::size_t n, RingPhase phase = RingPhase::AllReduce) {
    start_typed(data, n, MPI_FLOAT, sizeof(float), &add_into<float>, phase);
  }
  void start(double* data, std::size_t n) { start_typed(data, n, MPI_DOUBLE, sizeof(double), &add_into<double>); }
  void start(int64_t* data, std::size_t n) { start_typed(data, n, MPI_INT64_T, sizeof(int64_t), &add_into<int64_t>); }
  bool progress() { return advance(false); }
  void finish() { advance(true); }
  bool active() const { return active_; }
  // Bytes this rank has posted to its neighbour since construction (every phase, every type).
  std::uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  using AddFn = void (*)(void* dst, const void* src, std::size_t n);
  template <typename T>
  static void add_into(void* dst, const void* src, std::size_t n) {
    T* __restrict d = static_cast<T*>(dst);
    const T* __restrict s = static_cast<const T*>(src);
    for (std::size_t i = 0; i < n; ++i) d[i] += s[i];
  }
  void start_typed(void* data, std::size_t n, MPI_Datatype type, std::size_t elem, AddFn add,
                   RingPhase phase = RingPhase::AllReduce);
  bool advance(bool block);  // true once complete
  // Step t < W-1 is reduce-scatter step t, t >= W-1 is all-gather step t-(W-1).
  int recv_chunk(int t) const;
  // What a rank sends in step t is what it received (and, in reduce-scatter, reduced) in step t-1.
  int send_chunk(int t) const { return t == 0 ? rank_ : recv_chunk(t - 1); }
  int segments(int chunk) const;
  std::size_t segment(int chunk, int k, std::size_t& len) const;  // first element, and length
  void post_send(int t, int k);
  void post_recv(int t, int k);
  // The all-gather of step t writes into the chunk sent in reduce-scatter step t-(W-1): only once that
  // send is complete. Blocks or tests; true when it is.
  bool earlier_send_done(int t, int k, bool block);
  void on_received(int t, int k);  // add (reduce-scatter), forward, post the next receive

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::uint64_t bytes_sent_ = 0;
  RingOptions opt_;
  AlignedBuffer<unsigned char> scratch_;
  std::vector<MPI_Request> sends_, recvs_;
  std::vector<char> posted_;
  // The operation in flight.
  bool active_ = false;
  unsigned char* data_ = nullptr;
  std::size_t n_ = 0, elem_ = 0, S_ = 0;  // S_: elements a segment
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  AddFn add_ = nullptr;
  int K_ = 0, steps_ = 0, step_ = 0, done_in_step_ = 0;  // steps [step_, steps_) are left to run
};

}  // namespace ringtrain::dist
