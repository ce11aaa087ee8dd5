// Pointwise activations of the zoo, elementwise over n values:
//   ReLU6 (mobilenet_v2): out = min(max(x, 0), 6); backward d = dout where 0 < out < 6 (torch's
//     hardtanh_backward: zero at and beyond both kinks), so it reads the forward output like ReLU.
//   GELU, exact (ViT's MLP, nn.GELU() with approximate='none'): out = x Phi(x), Phi(x) = (1 + erf(x/sqrt 2)) / 2;
//     backward d = dout (Phi(x) + x phi(x)), phi the standard normal density, so it reads the input.
// Backward overwrites dinp, which may alias dout.
#pragma once
#include <cstdint>

namespace ringtrain::ops {
namespace ref {
template <typename T>
void relu6_forward(T* out, const T* inp, int64_t n);
template <typename T>
void relu6_backward(T* dinp, const T* dout, const T* out, int64_t n);
template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n);
// out (the forward's output) is unused here: the oracle takes Phi from erfc, not from the forward.
template <typename T>
void gelu_backward(T* dinp, const T* dout, const T* inp, const T* out, int64_t n);
}  // namespace ref
}  // namespace ringtrain::ops
