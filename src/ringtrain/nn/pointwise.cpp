#include "ringtrain/nn/pointwise.h"

namespace ringtrain::nn {

void ReLU6::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (!s.empty()) k.relu6_forward(out, in, s.size() * per_sample_);
}

void ReLU6::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float* out, const float* dout,
                           float* din, const Slice& s) {
  if (din && !s.empty()) k.relu6_backward(din, dout, out, s.size() * per_sample_);
}

void GELU::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (!s.empty()) k.gelu_forward(out, in, s.size() * per_sample_);
}

void GELU::backward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, const float* out, const float* dout,
                          float* din, const Slice& s) {
  if (din && !s.empty()) k.gelu_backward(din, dout, in, out, s.size() * per_sample_);
}

}  // namespace ringtrain::nn
