#include "ringtrain/nn/activation.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape ReLU::configure(const Shape& in) {
  per_sample_ = shape_numel(in);
  return in;
}

void ReLU::forward(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, int N) {
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo) k.relu_forward(out + lo * per_sample_, in + lo * per_sample_, (hi - lo) * per_sample_);
  });
}

void ReLU::backward(const ops::KernelTable& k, ParameterSet&, const float*, const float* out, const float* dout,
                    float* din, int N) {
  if (!din) return;
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo)
      k.relu_backward(din + lo * per_sample_, dout + lo * per_sample_, out + lo * per_sample_, (hi - lo) * per_sample_);
  });
}

Shape MaxPool2d::configure(const Shape& in) {
  check(in.size() == 3 && in[1] % window_ == 0 && in[2] % window_ == 0,
        name_ + ": expects [C,H,W] with H and W divisible by " + std::to_string(window_) + ", got " +
            shape_str(in));
  in_ = in;
  return {in[0], in[1] / window_, in[2] / window_};
}

ops::PoolShape MaxPool2d::shape(int N) const {
  return {int(N * in_[0]), int(in_[1]), int(in_[2]), window_};
}

void MaxPool2d::reserve(int max_batch) {
  argmax_.resize(std::size_t(max_batch) * in_[0] * (in_[1] / window_) * (in_[2] / window_));
}

void MaxPool2d::forward(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, int N) {
  const int64_t in_per = in_[0] * in_[1] * in_[2], out_per = in_[0] * (in_[1] / window_) * (in_[2] / window_);
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo) k.maxpool2d_forward(out + lo * out_per, argmax_.data() + lo * out_per, in + lo * in_per, shape(hi - lo));
  });
}

void MaxPool2d::backward(const ops::KernelTable& k, ParameterSet&, const float*, const float*, const float* dout,
                         float* din, int N) {
  if (!din) return;
  const int64_t in_per = in_[0] * in_[1] * in_[2], out_per = in_[0] * (in_[1] / window_) * (in_[2] / window_);
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo)
      k.maxpool2d_backward(din + lo * in_per, dout + lo * out_per, argmax_.data() + lo * out_per, shape(hi - lo));
  });
}

}  // namespace ringtrain::nn
