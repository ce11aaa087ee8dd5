// ReLU, elementwise over n values. Backward uses the forward output: d = dout where out > 0.
#pragma once
#include <cstdint>

namespace ringtrain::ops {
namespace ref {
template <typename T>
void relu_forward(T* out, const T* inp, int64_t n);
// Overwrites dinp; may alias dout.
template <typename T>
void relu_backward(T* dinp, const T* dout, const T* out, int64_t n);
}  // namespace ref
}  // namespace ringtrain::ops
