#include "ringtrain/nn/conv_relu_pool.h"

#include <algorithm>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/conv2d.h"

namespace ringtrain::nn {

Conv2dReluPool::Conv2dReluPool(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad)
    : Layer(std::move(name)), shape_(conv_shape(in_channels, out_channels, kernel, stride, pad)) {}

void Conv2dReluPool::declare(ParameterSet& params) { param_indices_ = declare_conv_params(params, name_, shape_); }

Shape Conv2dReluPool::configure(const Shape& in) {
  configure_conv_input(shape_, in, name_);
  check(ops::conv_relu_pool_fusable(shape_), name_ + ": the convolution's output " + std::to_string(shape_.P()) + "x" +
                                                 std::to_string(shape_.Q()) + " is not even, as 2x2 pooling needs");
  return {shape_.K, shape_.P() / 2, shape_.Q() / 2};
}

ops::Conv2dShape Conv2dReluPool::shape(int N) const { return with_batch(shape_, N); }

void Conv2dReluPool::chain_to(Conv2dReluPool& next) {
  next_ = &next;
  next.prev_ = this;
}

void Conv2dReluPool::drop_links_outside(const std::function<bool(const Layer*)>& inside) {
  if (next_ && !inside(next_)) next_ = nullptr;
  if (prev_ && !inside(prev_)) prev_ = nullptr;
}

bool Conv2dReluPool::blocked_out(const ops::KernelTable& k, int N) const {
  return next_ && k.conv2d_relu_pool_forward && k.conv2d_relu_pool_blocked && k.conv2d_relu_pool_blocked(shape(N)) &&
         k.conv2d_relu_pool_blocked(next_->shape(N));
}

ops::Conv2dShape Conv2dReluPool::fused_shape(const ops::KernelTable& k, int N) const {
  ops::Conv2dShape s = shape(N);
  s.in_blocked = blocked_in(k, N);
  s.out_blocked = blocked_out(k, N);
  return s;
}

std::size_t Conv2dReluPool::saved_offset(const ops::KernelTable& k, int N, int t) const {
  std::size_t off = 0;
  for (int u = 0; u < t; ++u) {
    auto [lo, hi] = slice_of(N, threads(), u, kSliceAlign);
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

void Conv2dReluPool::prepare(const ops::KernelTable& k) {
  if (k.conv2d_relu_pool_forward) {
    if (saved_offset(k, max_batch_, threads()) > saved_.size()) throw Error(name_ + ": saved state not reserved");
    return;
  }
  // The reference composition's buffers, sized on first use for the reserved batch.
  const std::size_t pre = std::size_t(max_batch_) * shape_.K * shape_.P() * shape_.Q();
  if (pre_.size() < pre) {
    pre_.resize(pre);
    act_.resize(pre);
    dact_.resize(pre);
    argmax_.resize(pre / 4);
  }
}

void Conv2dReluPool::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  prepare(k);
  forward_slice(k, p, in, out, {N, 0, N, 0});
}

void Conv2dReluPool::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                   const Slice& sl) {
  if (sl.empty()) return;
  const float* weight = p.param(param_indices_[0]);
  const float* bias = p.param(param_indices_[1]);
  const std::size_t pre_per = std::size_t(shape_.K) * shape_.P() * shape_.Q();
  const std::size_t out_per = pre_per / 4;
  const ops::Conv2dShape s = shape(sl.size());
  if (k.conv2d_relu_pool_forward) {
    k.conv2d_relu_pool_forward(out, saved_.data() + saved_offset(k, sl.N, sl.t), in,
                               weight, bias, fused_shape(k, sl.size()));
    return;
  }
  float* pre = pre_.data() + sl.n0 * pre_per;
  float* act = act_.data() + sl.n0 * pre_per;
  k.conv2d_forward(pre, in, weight, bias, s);
  k.relu_forward(act, pre, int64_t(sl.size() * pre_per));
  k.maxpool2d_forward(out, argmax_.data() + sl.n0 * out_per, act,
                      {sl.size() * shape_.K, shape_.P(), shape_.Q(), 2});
}

void Conv2dReluPool::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                    const float* dout, float* din, const Slice& sl) {
  const float* weight = p.param(param_indices_[0]);
  float* dweight = partials_.slot(sl.t, 0, p.grad(param_indices_[0]));
  float* dbias = partials_.slot(sl.t, 1, p.grad(param_indices_[1]));
  if (sl.empty()) {
    partials_.zero_slot(sl.t, 0, dweight);
    partials_.zero_slot(sl.t, 1, dbias);
    return;
  }
  const std::size_t pre_per = std::size_t(shape_.K) * shape_.P() * shape_.Q();
  const std::size_t out_per = pre_per / 4;
  const ops::Conv2dShape s = shape(sl.size());
  if (k.conv2d_relu_pool_backward) {
    k.conv2d_relu_pool_backward(din, dweight, dbias, dout, saved_.data() + saved_offset(k, sl.N, sl.t), in, weight,
                                fused_shape(k, sl.size()));
    return;
  }
  float* dact = dact_.data() + sl.n0 * pre_per;
  k.maxpool2d_backward(dact, dout, argmax_.data() + sl.n0 * out_per,
                       {sl.size() * shape_.K, shape_.P(), shape_.Q(), 2});
  k.relu_backward(dact, dact, act_.data() + sl.n0 * pre_per, int64_t(sl.size() * pre_per));
  k.conv2d_backward_weight(dweight, dbias, dact, in, s);
  if (din) k.conv2d_backward_data(din, dact, weight, s);
}

void Conv2dReluPool::reduce_grads(ParameterSet& p, int part, int parts) {
  partials_.reduce({p.grad(param_indices_[0]), p.grad(param_indices_[1])}, part, parts);
}

}  // namespace ringtrain::nn
