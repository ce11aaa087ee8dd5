// Layer normalisation over the last dimension (torch.nn.LayerNorm(dim, eps)) of `rows` rows of `dim`:
//   out = (x - mean) * rstd * weight + bias, mean and the biased variance over the row,
//   rstd = 1 / sqrt(var + eps); mean and rstd are saved per row for backward.
// Backward overwrites dx (may be null), dweight and dbias (sums over the rows of this call):
//   dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dout * weight, xhat = (x - mean) rstd,
// or with accumulate_dx adds that dx, rounded to the element type, to dx's values (one add each: the same
// bits as writing it elsewhere and adding: a residual stream's second gradient, nn::Model's fan-out).
#pragma once
#include <cstdint>

namespace ringtrain::ops {

struct LayerNormShape {
  int64_t rows = 1;
  int dim = 1;
  bool accumulate_dx = false;  // backward: dx += the gradient instead of dx =
};

namespace ref {
template <typename T>
void layer_norm_forward(T* out, T* save_mean, T* save_rstd, const T* x, const T* weight, const T* bias,
                        const LayerNormShape& s, double eps);
template <typename T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                         const T* save_mean, const T* save_rstd, const LayerNormShape& s);
}  // namespace ref

}  // namespace ringtrain::ops
