#include "ringtrain/nn/activation.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape ReLU::configure(const Shape& in) {
  per_sample_ = shape_numel(in);
  return in;
}

void ReLU::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  forward_slice(k, p, in, out, {N, 0, N, 0});
}

void ReLU::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                    float* din, int N) {
  backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
}

void ReLU::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.relu_forward(out, in, s.size() * per_sample_);
}

void ReLU::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float* out, const float* dout,
                          float* din, const Slice& s) {
  if (!din || s.empty()) return;
  k.relu_backward(din, dout, out, s.size() * per_sample_);
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

void MaxPool2d::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  forward_slice(k, p, in, out, {N, 0, N, 0});
}

void MaxPool2d::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                         const float* dout, float* din, int N) {
  backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
}

void MaxPool2d::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  const int64_t out_per = in_[0] * (in_[1] / window_) * (in_[2] / window_);
  k.maxpool2d_forward(out, argmax_.data() + s.n0 * out_per, in, shape(s.size()));
}

void MaxPool2d::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float*, const float* dout,
                               float* din, const Slice& s) {
  if (!din || s.empty()) return;
  const int64_t out_per = in_[0] * (in_[1] / window_) * (in_[2] / window_);
  k.maxpool2d_backward(din, dout, argmax_.data() + s.n0 * out_per, shape(s.size()));
}

}  // namespace ringtrain::nn
