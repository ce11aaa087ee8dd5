// Max pooling with a square window of size k and stride k (LeNet uses k = 2), no padding.
// Shapes: inp [NC,H,W] (N*C planes), out [NC,H/k,W/k]; argmax [NC,H/k,W/k] holds the
// winning position inside each window (dy*k + dx). Ties go to the first maximum in
// row-major order, as in PyTorch; a NaN wins like in PyTorch.
#pragma once
#include <cstdint>

namespace ringtrain::ops {

struct PoolShape {
  int NC = 1, H = 2, W = 2, k = 2;
  int P() const { return H / k; }
  int Q() const { return W / k; }
};

namespace ref {
template <typename T>
void maxpool2d_forward(T* out, uint8_t* argmax, const T* inp, const PoolShape& s);
// Overwrites dinp (zero except at each window's argmax).
template <typename T>
void maxpool2d_backward(T* dinp, const T* dout, const uint8_t* argmax, const PoolShape& s);
}  // namespace ref

}  // namespace ringtrain::ops
