// Max pooling with a square window of size k, stride `stride` (0: k, LeNet's non-overlapping k = 2) and
// padding `pad` (PyTorch's nn.MaxPool2d, floor mode, dilation 1: the ResNet stem's 3/2/1). Padding counts
// as -inf: a window's maximum is over its positions inside the input (pad <= k / 2, as PyTorch requires,
// leaves at least one). Shapes: inp [NC,H,W] (N*C planes), out [NC,P,Q] with
// P = (H + 2 pad - k) / stride + 1 (Q likewise); argmax [NC,P,Q] holds the winning position inside each
// window (dy*k + dx, counting padded positions; k <= 16). Ties go to the first maximum in row-major order,
// as in PyTorch; a NaN wins like in PyTorch (the first one).
//
// Global average pooling (adaptive average pool to 1x1): out [NC] = mean over the H*W values of each
// plane of inp [NC,H*W]; the backward spreads dout / (H*W) over the plane.
#pragma once
#include <cstdint>

namespace ringtrain::ops {

struct PoolShape {
  int NC = 1, H = 2, W = 2, k = 2;
  int stride = 0;  // 0: k
  int pad = 0;
  int st() const { return stride > 0 ? stride : k; }
  int P() const { return (H + 2 * pad - k) / st() + 1; }
  int Q() const { return (W + 2 * pad - k) / st() + 1; }
};

namespace ref {
template <typename T>
void maxpool2d_forward(T* out, uint8_t* argmax, const T* inp, const PoolShape& s);
// Overwrites dinp (zero except at each window's argmax).
template <typename T>
void maxpool2d_backward(T* dinp, const T* dout, const uint8_t* argmax, const PoolShape& s);
// out [NC] = mean of each plane of inp [NC][HW].
template <typename T>
void avgpool_global_forward(T* out, const T* inp, int64_t NC, int HW);
// dinp [NC][HW] = dout[plane] / HW (overwrites).
template <typename T>
void avgpool_global_backward(T* dinp, const T* dout, int64_t NC, int HW);
}  // namespace ref

}  // namespace ringtrain::ops
