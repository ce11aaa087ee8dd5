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

void HalfRingAllreduce::run(float* data, std::size_t n) {
  const int W = size_, r = rank_;
  if (W == 1 || n == 0) return;
  const bool bf = type_ == GradComm::Bf16;
  auto narrow = [bf](uint16_t* dst, const float* src, std::size_t m) {
    if (bf) float_to_bf16(dst, src, m); else float_to_fp16(dst, src, m);
  };
  auto widen = [bf](float* dst, const uint16_t* src, std::size_t m) {
    if (bf) bf16_to_float(dst, src, m); else fp16_to_float(dst, src, m);
  };
  const std::size_t max_chunk = (n + W - 1) / W + 1;
  if (wire_.size() < n) wire_.resize(n);
  if (recv_.size() < max_chunk) recv_.resize(max_chunk);
  if (wide_.size() < max_chunk) wide_.resize(max_chunk);
  auto mod = [W](int x) { return ((x % W) + W) % W; };
  auto begin = [&](int c) { return ring_chunk_begin(n, W, c); };
  auto len = [&](int c) { return ring_chunk_begin(n, W, c + 1) - ring_chunk_begin(n, W, c); };
  const int right = (r + 1) % W, left = (r + W - 1) % W;
  auto exchange = [&](const uint16_t* send, std::size_t ns, uint16_t* recv, std::size_t nr, int tag) {
    check(ns <= std::size_t(INT32_MAX) && nr <= std::size_t(INT32_MAX), "16-bit all-reduce: chunk too large");
    // Non-blocking pair + wait_all: waits in the calling thread's poll mode (the GradReducer's thread
    // yields its core to backward instead of spinning; ring_allreduce.h).
    MPI_Request req[2];
    MPI_Irecv(recv, int(nr), MPI_UINT16_T, left, tag, comm_, &req[0]);
    MPI_Isend(send, int(ns), MPI_UINT16_T, right, tag, comm_, &req[1]);
    wait_all(2, req);
    bytes_sent_ += ns * 2;
  };
  narrow(wire_.data(), data, n);
  // Reduce-scatter: step t sends chunk r - t (its fp32 partial sum, rounded) and adds chunk r - t - 1.
  for (int t = 0; t < W - 1; ++t) {
    const int sc = mod(r - t), rc = mod(r - t - 1);
    exchange(wire_.data() + begin(sc), len(sc), recv_.data(), len(rc), t);
    float* d = data + begin(rc);
    const std::size_t m = len(rc);
    widen(wide_.data(), recv_.data(), m);
    for (std::size_t i = 0; i < m; ++i) d[i] += wide_[i];
    narrow(wire_.data() + begin(rc), d, m);
  }
  // All-gather of the reduced chunks (rank r owns chunk r + 1), 16-bit words in place.
  for (int t = 0; t < W - 1; ++t) {
    const int sc = mod(r + 1 - t), rc = mod(r - t);
    exchange(wire_.data() + begin(sc), len(sc), wire_.data() + begin(rc), len(rc), W + t);
  }
  widen(data, wire_.data(), n);  // every rank, its own chunk included: identical bits everywhere
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

std::unique_ptr<Communicator> HalfGradCommunicator::duplicate() {
  return std::make_unique<HalfGradCommunicator>(inner_->duplicate(), type_);
}

}  // namespace ringtrain::dist
