// 16-bit gradient traffic (--grad-comm fp32|bf16|fp16): a ring all-reduce whose messages carry bf16 or
// fp16 values while every rank adds in fp32, halving the bytes on the wire.
//
// The ring is the same schedule as RingAllreduce (reduce-scatter then all-gather, 2(W-1) steps of one
// chunk each): each step's outgoing chunk is the fp32 partial sum rounded to 16 bits; on arrival it is
// widened and added to the local fp32 value. After the all-gather every rank widens the same 16-bit
// words, so all ranks end with the same bits. Error: at most W roundings of partial sums (each <= sum|x|)
// and W-1 fp32 adds, so |result - exact| <= ((1 + u_h)^W (1 + u)^W - 1) sum_r |x_r|, u_h = 2^-8 (bf16)
// or 2^-11 (fp16), u = 2^-24 (tests/mpi/test_half_allreduce.cpp). fp16 overflows to inf above 65504,
// which the loss scaler's inf check then catches. Messages are one chunk (no segment pipelining: LeNet's
// buckets are <= 240 KB). Resumable like RingAllreduce, so the GradReducer overlaps it with backward.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/mpi_communicator.h"

namespace ringtrain::dist {

enum class GradComm { Fp32, Bf16, Fp16 };
// "fp32|bf16|fp16"; throws Error naming the option otherwise.
GradComm parse_grad_comm(const std::string& name);
const char* grad_comm_name(GradComm g);
inline std::size_t grad_comm_bytes(GradComm g) { return g == GradComm::Fp32 ? 4 : 2; }
// Bytes one rank sends in one ring all-reduce of n values over W ranks with elements of elem_bytes:
// 2(W-1) steps, each one chunk (chunk sizes as ring_chunk_begin). 0 for W = 1.
std::size_t ring_bytes_sent(std::size_t n, int W, std::size_t elem_bytes);

// True on every rank when `local` is true on any rank (a one-value all-reduce): how the ranks agree to
// skip a step whose gradients hold inf/NaN anywhere (optim::LossScaler::step's any_rank).
bool any_rank(Communicator& comm, bool local);

class HalfRingAllreduce {
 public:
  // comm is borrowed; one object per thread at a time. type must be Bf16 or Fp16.
  HalfRingAllreduce(MPI_Comm comm, GradComm type);
  // In-place sum over the ranks of comm, 16 bits on the wire.
  void run(float* data, std::size_t n) { start(data, n); finish(); }
  // The same sum, resumable (as RingAllreduce's): start() rounds the buffer and posts the first step,
  // progress() does what has arrived without blocking (true once complete), finish() blocks.
  void start(float* data, std::size_t n);
  bool progress() { return advance(false); }
  void finish() { advance(true); }
  std::size_t bytes_sent() const { return bytes_sent_; }  // total since construction

 private:
  void narrow(uint16_t* dst, const float* src, std::size_t m) const;
  void widen(float* dst, const uint16_t* src, std::size_t m) const;
  std::size_t chunk_begin(int c) const;  // c taken mod W
  std::size_t chunk_len(int c) const;
  void post_step();
  void complete_step();
  bool advance(bool block);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  GradComm type_;
  std::vector<uint16_t> wire_, recv_;
  std::vector<float> wide_;
  std::size_t bytes_sent_ = 0;
  // The operation in flight.
  bool active_ = false;
  float* data_ = nullptr;
  std::size_t n_ = 0;
  int step_ = 0;
  MPI_Request req_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// A Communicator whose float all-reduce (the gradients') goes through HalfRingAllreduce; everything
// else is the inner communicator's. Give it to GradReducer; duplicate() duplicates the inner one.
// inner must be an MpiCommunicator (or a one-rank world, where nothing travels).
class HalfGradCommunicator final : public Communicator {
 public:
  HalfGradCommunicator(Communicator& inner, GradComm type);                    // borrows inner
  HalfGradCommunicator(std::unique_ptr<Communicator> inner, GradComm type);  // owns inner
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void allreduce_sum(float* data, std::size_t n) override;
  void start_allreduce_sum(float* data, std::size_t n) override;
  bool test_allreduce() override;
  void wait_allreduce() override;
  void allreduce_sum(double* data, std::size_t n) override { inner_->allreduce_sum(data, n); }
  void allreduce_sum(int64_t* data, std::size_t n) override { inner_->allreduce_sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override { inner_->broadcast(data, bytes, root); }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Communicator> duplicate() override;
  // The 16-bit ring's bytes (the float sums'; the inner communicator counts its own).
  Traffic traffic() const override { return {ring_ ? ring_->bytes_sent() : 0, 0}; }

 private:
  void init();
  std::unique_ptr<Communicator> owned_;
  Communicator* inner_;
  GradComm type_;
  std::unique_ptr<HalfRingAllreduce> ring_;
  MpiCommunicator* mpi_ = nullptr;  // inner_ as MPI: its watchdog guards the 16-bit all-reduce too
  std::optional<Watchdog::Guard> pending_guard_;  // armed while a non-blocking sum is in flight
};

}  // namespace ringtrain::dist
