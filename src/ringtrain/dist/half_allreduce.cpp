#include "ringtrain/dist/half_allreduce.h"

#include <algorithm>

#include "ringtrain/core/error.h"
#include "ringtrain/core/half.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {

GradComm parse_grad_comm(const std::string& name) {
  for (GradComm g : {GradComm::Fp32, GradComm::Bf16, GradComm::Fp16})
    if (name == grad_comm_name(g)) return g;
  throw Error("gradient communication type (--grad-comm) '" + name + "' is not one of fp32, bf16, fp16");
}

const char* grad_comm_name(GradComm g) {
  switch (g) {
    case GradComm::Fp32: return "fp32";
    case GradComm::Bf16: return "bf16";
    case GradComm::Fp16: return "fp16";
  }
  return "?";
}

std::size_t ring_bytes_sent(std::size_t n, int W, std::size_t elem_bytes) {
  if (W <= 1) return 0;
  // Each rank sends W-1 chunks in reduce-scatter and W-1 in all-gather; over all ranks every chunk is
  // sent W-1 times a phase, so ranks send 2 (W-1) n / W elements on average (exactly, summed over ranks).
  const std::size_t total = 2 * std::size_t(W - 1) * n / std::size_t(W);
  return total * elem_bytes;
}

bool any_rank(Communicator& comm, bool local) {
  double flag = local ? 1.0 : 0.0;
  comm.allreduce_sum(&flag, 1);
  return flag > 0.0;
}

HalfRingAllreduce::HalfRingAllreduce(MPI_Comm comm, GradComm type) : comm_(comm), type_(type) {
  check(type != GradComm::Fp32, "HalfRingAllreduce: needs bf16 or fp16");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void HalfRingAllreduce::narrow(uint16_t* dst, const float* src, std::size_t m) const {
  if (type_ == GradComm::Bf16) float_to_bf16(dst, src, m); else float_to_fp16(dst, src, m);
}

void HalfRingAllreduce::widen(float* dst, const uint16_t* src, std::size_t m) const {
  if (type_ == GradComm::Bf16) bf16_to_float(dst, src, m); else fp16_to_float(dst, src, m);
}

std::size_t HalfRingAllreduce::chunk_begin(int c) const { return ring_chunk_begin(n_, size_, ((c % size_) + size_) % size_); }
std::size_t HalfRingAllreduce::chunk_len(int c) const {
  const int m = ((c % size_) + size_) % size_;
  return ring_chunk_begin(n_, size_, m + 1) - ring_chunk_begin(n_, size_, m);
}

// Step t < W-1 (reduce-scatter) sends chunk r - t (its fp32 partial sum, rounded) and receives chunk
// r - t - 1 into recv_ to be added; step W-1+u (all-gather of the reduced chunks: rank r owns chunk r + 1)
// sends chunk r + 1 - u and receives chunk r - u straight into the 16-bit words, in place.
void HalfRingAllreduce::post_step() {
  const int W = size_, r = rank_, t = step_;
  const bool rs = t < W - 1;
  const int u = rs ? t : t - (W - 1);
  const int sc = rs ? r - t : r + 1 - u, rc = rs ? r - t - 1 : r - u;
  const std::size_t ns = chunk_len(sc), nr = chunk_len(rc);
  check(ns <= std::size_t(INT32_MAX) && nr <= std::size_t(INT32_MAX), "16-bit all-reduce: chunk too large");
  uint16_t* recv = rs ? recv_.data() : wire_.data() + chunk_begin(rc);
  // The send first, as every ring and schedule here: over TCP a step's receive posted first cost the
  // 32-bit schedules a third of their time between hosts (dist/step_schedule.cpp).
  MPI_Isend(wire_.data() + chunk_begin(sc), int(ns), MPI_UINT16_T, (r + 1) % W, t, comm_, &req_[1]);
  MPI_Irecv(recv, int(nr), MPI_UINT16_T, (r + W - 1) % W, t, comm_, &req_[0]);
  bytes_sent_ += ns * 2;
}

void HalfRingAllreduce::complete_step() {
  if (step_ >= size_ - 1) return;  // all-gather: the words arrived in place
  const int rc = rank_ - step_ - 1;
  float* d = data_ + chunk_begin(rc);
  const std::size_t m = chunk_len(rc);
  widen(wide_.data(), recv_.data(), m);
  for (std::size_t i = 0; i < m; ++i) d[i] += wide_[i];
  narrow(wire_.data() + chunk_begin(rc), d, m);
}

void HalfRingAllreduce::start(float* data, std::size_t n) {
  check(!active_, "16-bit all-reduce: a second operation started before the first finished");
  const int W = size_;
  if (W == 1 || n == 0) return;
  data_ = data;
  n_ = n;
  const std::size_t max_chunk = (n + W - 1) / W + 1;
  if (wire_.size() < n) wire_.resize(n);
  if (recv_.size() < max_chunk) recv_.resize(max_chunk);
  if (wide_.size() < max_chunk) wide_.resize(max_chunk);
  narrow(wire_.data(), data, n);
  step_ = 0;
  active_ = true;
  post_step();
}

bool HalfRingAllreduce::advance(bool block) {
  if (!active_) return true;
  const int steps = 2 * (size_ - 1);
  while (step_ < steps) {
    if (block) {
      wait_all(2, req_);
    } else {
      int flag = 0;
      MPI_Testall(2, req_, &flag, MPI_STATUSES_IGNORE);
      if (!flag) return false;
    }
    complete_step();
    if (++step_ < steps) post_step();
  }
  widen(data_, wire_.data(), n_);  // every rank, its own chunk included: identical bits everywhere
  active_ = false;
  return true;
}

HalfGradCommunicator::HalfGradCommunicator(Communicator& inner, GradComm type) : inner_(&inner), type_(type) { init(); }
HalfGradCommunicator::HalfGradCommunicator(std::unique_ptr<Communicator> inner, GradComm type)
    : owned_(std::move(inner)), inner_(owned_.get()), type_(type) {
  init();
}

void HalfGradCommunicator::init() {
  if (type_ == GradComm::Fp32 || inner_->size() == 1) return;
  auto* mpi = dynamic_cast<MpiCommunicator*>(inner_);
  check(mpi != nullptr, "--grad-comm " + std::string(grad_comm_name(type_)) + " needs an MPI communicator");
  ring_ = std::make_unique<HalfRingAllreduce>(mpi->comm(), type_);
  mpi_ = mpi;
}

void HalfGradCommunicator::allreduce_sum(float* data, std::size_t n) {
  if (ring_) {
    auto guard = mpi_->watchdog().arm("allreduce_sum", "float", n, grad_comm_name(type_));
    ring_->run(data, n);
  }
  else
    inner_->allreduce_sum(data, n);
}

void HalfGradCommunicator::start_allreduce_sum(float* data, std::size_t n) {
  if (!ring_) return inner_->start_allreduce_sum(data, n);
  check(!pending_guard_, "allreduce_sum: a non-blocking sum started before the previous one completed");
  if (n == 0) return;
  pending_guard_.emplace(mpi_->watchdog().arm("allreduce_sum (overlapped)", "float", n, grad_comm_name(type_)));
  ring_->start(data, n);
}

bool HalfGradCommunicator::test_allreduce() {
  if (!ring_) return inner_->test_allreduce();
  if (!pending_guard_) return true;
  if (!ring_->progress()) return false;
  pending_guard_.reset();
  return true;
}

void HalfGradCommunicator::wait_allreduce() {
  if (!ring_) return inner_->wait_allreduce();
  if (!pending_guard_) return;
  ring_->finish();
  pending_guard_.reset();
}

std::unique_ptr<Communicator> HalfGradCommunicator::duplicate() {
  return std::make_unique<HalfGradCommunicator>(inner_->duplicate(), type_);
}

}  // namespace ringtrain::dist
