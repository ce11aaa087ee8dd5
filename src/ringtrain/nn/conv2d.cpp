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
  const std::size_t in_per = std::size_t(shape_.C) * shape_.H * shape_.W;
  const std::size_t out_per = std::size_t(shape_.K) * shape_.P() * shape_.Q();
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo)
      k.conv2d_forward(out + lo * out_per, in + lo * in_per, p.param(param_indices_[0]), p.param(param_indices_[1]),
                       shape(hi - lo));
  });
}

void Conv2d::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                      const float* dout, float* din, int N) {
  const std::size_t in_per = std::size_t(shape_.C) * shape_.H * shape_.W;
  const std::size_t out_per = std::size_t(shape_.K) * shape_.P() * shape_.Q();
  float* dweight = p.grad(param_indices_[0]);
  float* dbias = p.grad(param_indices_[1]);
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi == lo) {
      partials_.zero_slot(t, 0, dweight);
      partials_.zero_slot(t, 1, dbias);
      return;
    }
    k.conv2d_backward_weight(partials_.slot(t, 0, dweight), partials_.slot(t, 1, dbias), dout + lo * out_per,
                             in + lo * in_per, shape(hi - lo));
    if (din) k.conv2d_backward_data(din + lo * in_per, dout + lo * out_per, p.param(param_indices_[0]), shape(hi - lo));
  });
  partials_.reduce(pool_, {dweight, dbias});
}

}  // namespace ringtrain::nn
