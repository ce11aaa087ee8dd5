#include "ringtrain/nn/conv_relu_pool.h"

#include <algorithm>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

namespace {
// Batch slices start on multiples of 16 samples: whole vector blocks for every ISA's kernels.
constexpr int kBatchAlign = 16;
}  // namespace

Conv2dReluPool::Conv2dReluPool(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad)
    : Layer(std::move(name)) {
  shape_.C = in_channels;
  shape_.K = out_channels;
  shape_.R = shape_.S = kernel;
  shape_.stride = stride;
  shape_.pad = pad;
}

void Conv2dReluPool::declare(ParameterSet& params) {
  int fan_in = shape_.C * shape_.R * shape_.S;
  param_indices_ = {params.declare(name_ + ".weight", {shape_.K, shape_.C, shape_.R, shape_.S}, fan_in),
                    params.declare(name_ + ".bias", {shape_.K}, fan_in)};
}

Shape Conv2dReluPool::configure(const Shape& in) {
  check(in.size() == 3 && in[0] == shape_.C,
        name_ + ": expects input [" + std::to_string(shape_.C) + ",H,W], got " + shape_str(in));
  shape_.H = int(in[1]);
  shape_.W = int(in[2]);
  check(shape_.P() > 0 && shape_.Q() > 0, name_ + ": input " + shape_str(in) + " is smaller than the kernel");
  check(ops::conv_relu_pool_fusable(shape_), name_ + ": the convolution's output " + std::to_string(shape_.P()) + "x" +
                                                 std::to_string(shape_.Q()) + " is not even, as 2x2 pooling needs");
  return {shape_.K, shape_.P() / 2, shape_.Q() / 2};
}

ops::Conv2dShape Conv2dReluPool::shape(int N) const {
  ops::Conv2dShape s = shape_;
  s.N = N;
  return s;
}

std::size_t Conv2dReluPool::saved_offset(const ops::KernelTable& k, int N, int t) const {
  std::size_t off = 0;
  for (int u = 0; u < t; ++u) {
    auto [lo, hi] = slice_of(N, threads(), u, kBatchAlign);
    if (hi > lo) off += k.conv2d_relu_pool_saved(shape(hi - lo));
  }
  return off;
}

void Conv2dReluPool::reserve(int max_batch) {
  max_batch_ = max_batch;
  std::size_t saved = 0;
  for (ops::IsaLevel level : ops::supported_isas()) {
    const ops::KernelTable& k = ops::kernels_for(level);
    if (k.conv2d_relu_pool_saved) saved = std::max(saved, saved_offset(k, max_batch, threads()));
  }
  saved_.resize(saved);
  partials_.reserve(threads(), {std::size_t(shape_.K) * shape_.C * shape_.R * shape_.S, std::size_t(shape_.K)});
}

void Conv2dReluPool::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  const float* weight = p.param(param_indices_[0]);
  const float* bias = p.param(param_indices_[1]);
  const std::size_t in_per = std::size_t(shape_.C) * shape_.H * shape_.W;
  const std::size_t out_per = std::size_t(shape_.K) * (shape_.P() / 2) * (shape_.Q() / 2);
  if (k.conv2d_relu_pool_forward) {
    if (saved_offset(k, N, threads()) > saved_.size()) throw Error(name_ + ": batch larger than reserved");
    parallel_run(pool_, [&](int t) {
      auto [lo, hi] = slice_of(N, threads(), t, kBatchAlign);
      if (hi == lo) return;
      k.conv2d_relu_pool_forward(out + lo * out_per, saved_.data() + saved_offset(k, N, t), in + lo * in_per, weight,
                                 bias, shape(hi - lo));
    });
    return;
  }
  // The reference composition (buffers sized on first use, for the reserved batch).
  const std::size_t pre = std::size_t(max_batch_) * shape_.K * shape_.P() * shape_.Q();
  if (pre_.size() < pre) {
    pre_.resize(pre);
    act_.resize(pre);
    dact_.resize(pre);
    argmax_.resize(std::size_t(max_batch_) * out_per);
  }
  const ops::Conv2dShape s = shape(N);
  k.conv2d_forward(pre_.data(), in, weight, bias, s);
  k.relu_forward(act_.data(), pre_.data(), int64_t(N) * shape_.K * shape_.P() * shape_.Q());
  k.maxpool2d_forward(out, argmax_.data(), act_.data(), {N * shape_.K, shape_.P(), shape_.Q(), 2});
}

void Conv2dReluPool::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                              const float* dout, float* din, int N) {
  const float* weight = p.param(param_indices_[0]);
  float* dweight = p.grad(param_indices_[0]);
  float* dbias = p.grad(param_indices_[1]);
  const std::size_t in_per = std::size_t(shape_.C) * shape_.H * shape_.W;
  const std::size_t out_per = std::size_t(shape_.K) * (shape_.P() / 2) * (shape_.Q() / 2);
  if (k.conv2d_relu_pool_backward) {
    parallel_run(pool_, [&](int t) {
      auto [lo, hi] = slice_of(N, threads(), t, kBatchAlign);
      if (hi == lo) {
        partials_.zero_slot(t, 0, dweight);
        partials_.zero_slot(t, 1, dbias);
        return;
      }
      k.conv2d_relu_pool_backward(din ? din + lo * in_per : nullptr, partials_.slot(t, 0, dweight),
                                  partials_.slot(t, 1, dbias), dout + lo * out_per,
                                  saved_.data() + saved_offset(k, N, t), weight, shape(hi - lo));
    });
    partials_.reduce(pool_, {dweight, dbias});
    return;
  }
  const ops::Conv2dShape s = shape(N);
  const int64_t n = int64_t(N) * shape_.K * shape_.P() * shape_.Q();
  k.maxpool2d_backward(dact_.data(), dout, argmax_.data(), {N * shape_.K, shape_.P(), shape_.Q(), 2});
  k.relu_backward(dact_.data(), dact_.data(), act_.data(), n);
  k.conv2d_backward_weight(dweight, dbias, dact_.data(), in, s);
  if (din) k.conv2d_backward_data(din, dact_.data(), weight, s);
}

}  // namespace ringtrain::nn
