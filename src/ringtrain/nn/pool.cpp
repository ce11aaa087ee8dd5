#include "ringtrain/nn/pool.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape AdaptiveAvgPool2d::configure(const Shape& in) {
  check(in.size() == 3 && in[1] > 0 && in[2] > 0, name_ + ": expects [C,H,W], got " + shape_str(in));
  channels_ = in[0];
  plane_ = int(in[1] * in[2]);
  return {in[0], 1, 1};
}

void AdaptiveAvgPool2d::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out,
                                      const Slice& s) {
  if (s.empty()) return;
  k.avgpool_global_forward(out, in, s.size() * channels_, plane_);
}

void AdaptiveAvgPool2d::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float*,
                                       const float* dout, float* din, const Slice& s) {
  if (!din || s.empty()) return;
  k.avgpool_global_backward(din, dout, s.size() * channels_, plane_);
}

}  // namespace ringtrain::nn
