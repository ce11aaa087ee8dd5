#include "ringtrain/nn/conv2d.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad)
    : Layer(std::move(name)) {
  shape_.C = in_channels;
  shape_.K = out_channels;
  shape_.R = shape_.S = kernel;
  shape_.stride = stride;
  shape_.pad = pad;
}

void Conv2d::declare(ParameterSet& params) {
  int fan_in = shape_.C * shape_.R * shape_.S;
  param_indices_ = {params.declare(name_ + ".weight", {shape_.K, shape_.C, shape_.R, shape_.S}, fan_in),
                    params.declare(name_ + ".bias", {shape_.K}, fan_in)};
}

Shape Conv2d::configure(const Shape& in) {
  check(in.size() == 3 && in[0] == shape_.C,
        name_ + ": expects input [" + std::to_string(shape_.C) + ",H,W], got " + shape_str(in));
  shape_.H = int(in[1]);
  shape_.W = int(in[2]);
  check(shape_.P() > 0 && shape_.Q() > 0, name_ + ": input " + shape_str(in) + " is smaller than the kernel");
  return {shape_.K, shape_.P(), shape_.Q()};
}

ops::Conv2dShape Conv2d::shape(int N) const {
  ops::Conv2dShape s = shape_;
  s.N = N;
  return s;
}

void Conv2d::reserve(int max_batch) {
  partials_.reserve(threads(), {std::size_t(shape_.K) * shape_.C * shape_.R * shape_.S, std::size_t(shape_.K)});
}

void Conv2d::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  forward_slice(k, p, in, out, {N, 0, N, 0});
}

void Conv2d::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                      const float* dout, float* din, int N) {
  backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
}

void Conv2d::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.conv2d_forward(out, in, p.param(param_indices_[0]), p.param(param_indices_[1]),
                   shape(s.size()));
}

void Conv2d::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                            const float* dout, float* din, const Slice& s) {
  float* dweight = partials_.slot(s.t, 0, p.grad(param_indices_[0]));
  float* dbias = partials_.slot(s.t, 1, p.grad(param_indices_[1]));
  if (s.empty()) {
    partials_.zero_slot(s.t, 0, dweight);
    partials_.zero_slot(s.t, 1, dbias);
    return;
  }
  k.conv2d_backward_weight(dweight, dbias, dout, in, shape(s.size()));
  if (din) k.conv2d_backward_data(din, dout, p.param(param_indices_[0]), shape(s.size()));
}

void Conv2d::reduce_grads(ParameterSet& p) { partials_.reduce({p.grad(param_indices_[0]), p.grad(param_indices_[1])}); }

}  // namespace ringtrain::nn
