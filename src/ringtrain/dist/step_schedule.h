// The engine under the recursive-doubling, halving-doubling and hierarchical all-reduces: an algorithm is
// a list of steps, built once per call from (rank, size, n); each step sends one range of the buffer to
// one peer and/or receives one range from one peer, and either adds what it received into that range
// (a reduce step) or copies it there (a gather step). Steps run strictly one after another, so every
// add happens in the order the list gives: the list *is* the algorithm's fixed combination order, which
// is what makes the result the same bits on every rank and run to run.
//
// A step moves its range in messages of at most 512 KiB, all posted at once, sends before receives (as the
// ring its segments: over TCP either choice cost time, step_schedule.cpp).
// ScheduledAllreduce runs a list resumably, as RingAllreduce does: start() posts the first step,
// progress() completes whatever steps have arrived without blocking, finish() blocks.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringtrain/core/aligned.h"

namespace ringtrain::dist {

// A range of the buffer, in elements, to or from one rank of comm (peer < 0: no transfer).
struct Transfer {
  MPI_Comm comm = MPI_COMM_NULL;
  int peer = -1;
  std::size_t offset = 0, count = 0;
};

struct Step {
  Transfer send, recv;
  bool reduce = false;  // recv is added into its range (else copied there)
};
// A rank's rank and size in comm.
struct RankIn {
  MPI_Comm comm;
  int rank, size;
};
RankIn rank_in(MPI_Comm comm);

class ScheduledAllreduce {
 public:
  virtual ~ScheduledAllreduce() = default;
  // In-place sum (start + finish).
  void run(float* data, std::size_t n) { start(data, n); finish(); }
  void run(double* data, std::size_t n) { start(data, n); finish(); }
  void run(int64_t* data, std::size_t n) { start(data, n); finish(); }
  // Resumable: one operation at a time; `data` untouched by the caller until complete. The bits do not
  // depend on how the work was split between progress() calls.
  void start(float* data, std::size_t n) { start_typed(data, n, MPI_FLOAT, sizeof(float), &add_into<float>); }
  void start(double* data, std::size_t n) { start_typed(data, n, MPI_DOUBLE, sizeof(double), &add_into<double>); }
  void start(int64_t* data, std::size_t n) { start_typed(data, n, MPI_INT64_T, sizeof(int64_t), &add_into<int64_t>); }
  bool progress() { return advance(false); }  // true once complete; never blocks
  void finish() { advance(true); }
  bool active() const { return active_; }
  // Bytes this rank has posted to its peers since construction.
  std::uint64_t bytes_sent() const { return bytes_sent_; }

 protected:
  // This rank's steps for a sum of n elements.
  virtual std::vector<Step> plan(std::size_t n) const = 0;

 private:
  using AddFn = void (*)(void* dst, const void* src, std::size_t n);
  template <typename T>
  static void add_into(void* dst, const void* src, std::size_t n) {
    T* __restrict d = static_cast<T*>(dst);
    const T* __restrict s = static_cast<const T*>(src);
    for (std::size_t i = 0; i < n; ++i) d[i] += s[i];  // d + s == s + d bitwise: either peer's view
  }
  void start_typed(void* data, std::size_t n, MPI_Datatype type, std::size_t elem, AddFn add);
  void post(const Step& s);
  bool advance(bool block);

  std::uint64_t bytes_sent_ = 0;
  AlignedBuffer<unsigned char> scratch_;  // a reduce step's incoming range
  std::vector<Step> steps_;
  std::size_t next_ = 0;  // the step posted (in flight) is next_ - 1
  std::vector<MPI_Request> reqs_;  // the step in flight: its send's segments, then its receive's
  bool active_ = false;
  unsigned char* data_ = nullptr;
  std::size_t elem_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  AddFn add_ = nullptr;
};

}  // namespace ringtrain::dist
