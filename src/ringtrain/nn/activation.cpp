#include "ringtrain/nn/activation.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape ReLU::configure(const Shape& in) {
  per_sample_ = shape_numel(in);
  return in;
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

MaxPool2d::MaxPool2d(std::string name, int kernel, int stride, int pad)
    : Layer(std::move(name)), window_(kernel), stride_(stride > 0 ? stride : kernel), pad_(pad) {
  // (argmax holds dy * k + dx in a byte; PyTorch's own limit on the padding)
  check(kernel >= 1 && kernel <= 16 && pad >= 0 && pad <= kernel / 2,
        name_ + ": max-pool needs 1 <= kernel <= 16 and 0 <= pad <= kernel / 2, got kernel " + std::to_string(kernel) +
            ", pad " + std::to_string(pad));
}

Shape MaxPool2d::configure(const Shape& in) {
  // Non-overlapping windows without padding keep LeNet's rule (H and W whole multiples of the window);
  // otherwise PyTorch's floor mode.
  const bool tiling = stride_ == window_ && pad_ == 0;
  check(in.size() == 3 && (tiling ? in[1] % window_ == 0 && in[2] % window_ == 0
                                  : in[1] + 2 * pad_ >= window_ && in[2] + 2 * pad_ >= window_),
        name_ + (tiling ? ": expects [C,H,W] with H and W divisible by " + std::to_string(window_)
                        : ": expects [C,H,W] at least the window " + std::to_string(window_) + " with padding") +
            ", got " + shape_str(in));
  in_ = in;
  const ops::PoolShape s = shape(1);
  return {in[0], s.P(), s.Q()};
}

ops::PoolShape MaxPool2d::shape(int N) const {
  ops::PoolShape s{int(N * in_[0]), int(in_[1]), int(in_[2]), window_};
  s.stride = stride_;
  s.pad = pad_;
  return s;
}

int64_t MaxPool2d::out_per_sample() const {
  const ops::PoolShape s = shape(1);
  return in_[0] * s.P() * s.Q();
}

void MaxPool2d::reserve(int max_batch) { argmax_.resize(std::size_t(max_batch) * out_per_sample()); }

void MaxPool2d::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.maxpool2d_forward(out, argmax_.data() + s.n0 * out_per_sample(), in, shape(s.size()));
}

void MaxPool2d::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float*, const float* dout,
                               float* din, const Slice& s) {
  if (!din || s.empty()) return;
  k.maxpool2d_backward(din, dout, argmax_.data() + s.n0 * out_per_sample(), shape(s.size()));
}

}  // namespace ringtrain::nn
