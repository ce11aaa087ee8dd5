#include "ringtrain/nn/conv2d.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

ops::Conv2dShape conv_shape(int in_channels, int out_channels, int kernel, int stride, int pad) {
  ops::Conv2dShape s;
  s.C = in_channels;
  s.K = out_channels;
  s.R = s.S = kernel;
  s.stride = stride;
  s.pad = pad;
  return s;
}

std::vector<int> declare_conv_params(ParameterSet& params, const std::string& name, const ops::Conv2dShape& s) {
  const int fan_in = s.C * s.R * s.S;
  return {params.declare(name + ".weight", {s.K, s.C, s.R, s.S}, fan_in), params.declare(name + ".bias", {s.K}, fan_in)};
}

void configure_conv_input(ops::Conv2dShape& s, const Shape& in, const std::string& name) {
  check(in.size() == 3 && in[0] == s.C, name + ": expects input [" + std::to_string(s.C) + ",H,W], got " + shape_str(in));
  s.H = int(in[1]);
  s.W = int(in[2]);
  check(s.P() > 0 && s.Q() > 0, name + ": input " + shape_str(in) + " is smaller than the kernel");
}

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad)
    : Layer(std::move(name)), shape_(conv_shape(in_channels, out_channels, kernel, stride, pad)) {}

void Conv2d::declare(ParameterSet& params) { param_indices_ = declare_conv_params(params, name_, shape_); }

Shape Conv2d::configure(const Shape& in) {
  configure_conv_input(shape_, in, name_);
  return {shape_.K, shape_.P(), shape_.Q()};
}

ops::Conv2dShape Conv2d::shape(int N) const { return with_batch(shape_, N); }

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
