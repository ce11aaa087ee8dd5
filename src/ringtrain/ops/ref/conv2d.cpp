// Reference conv2d: direct loops, no tricks. The oracle every fast kernel is tested against. The forward
// sums in double whatever T: one output sums up to C*R*S = 4608 products (resnet18's layer4), and a plain
// float sum of that many drifts ~sqrt(n) ulps in one order; a batch norm over 1x1 maps (resnet18's layer4
// at 28x28 inputs, batch 8) divides by a spread of a few ulps and turned that drift into 20% errors in
// the gradients against torchvision's float64 (tests/test_zoo_golden.cpp), where the fast kernels' blocked
// sums stayed within 2e-5. An oracle should be the more accurate side.
// Groups: output channel k of group g = k / Kg reads input channels g*Cg .. g*Cg + Cg - 1 through
// weight[k][c - g*Cg] (conv2d.h); groups = 1 is the plain convolution, in the same loop order as before.
#include "ringtrain/ops/conv2d.h"

#include <cstdint>

namespace ringtrain::ops::ref {

template <typename T>
void conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, const Conv2dShape& s) {
  const int P = s.P(), Q = s.Q(), Cg = s.Cg(), Kg = s.Kg();
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const int c0 = k / Kg * Cg;
          double acc = bias ? double(bias[k]) : 0.0;
          for (int cg = 0; cg < Cg; ++cg)
            for (int r = 0; r < s.R; ++r) {
              int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                int w = q * s.stride - s.pad + t;
                if (w < 0 || w >= s.W) continue;
                acc += double(inp[((int64_t(n) * s.C + c0 + cg) * s.H + h) * s.W + w]) *
                       double(weight[((int64_t(k) * Cg + cg) * s.R + r) * s.S + t]);
              }
            }
          out[((int64_t(n) * s.K + k) * P + p) * Q + q] = T(acc);
        }
}

template <typename T>
void conv2d_backward_data(T* dinp, const T* dout, const T* weight, const Conv2dShape& s) {
  const int P = s.P(), Q = s.Q(), Cg = s.Cg(), Kg = s.Kg();
  for (int64_t i = 0; i < int64_t(s.N) * s.C * s.H * s.W; ++i) dinp[i] = T(0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const int c0 = k / Kg * Cg;
          T g = dout[((int64_t(n) * s.K + k) * P + p) * Q + q];
          for (int cg = 0; cg < Cg; ++cg)
            for (int r = 0; r < s.R; ++r) {
              int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                int w = q * s.stride - s.pad + t;
                if (w < 0 || w >= s.W) continue;
                dinp[((int64_t(n) * s.C + c0 + cg) * s.H + h) * s.W + w] +=
                    g * weight[((int64_t(k) * Cg + cg) * s.R + r) * s.S + t];
              }
            }
        }
}

template <typename T>
void conv2d_backward_weight(T* dweight, T* dbias, const T* dout, const T* inp, const Conv2dShape& s) {
  const int P = s.P(), Q = s.Q(), Cg = s.Cg(), Kg = s.Kg();
  for (int64_t i = 0; i < int64_t(s.K) * Cg * s.R * s.S; ++i) dweight[i] = T(0);
  if (dbias)
    for (int k = 0; k < s.K; ++k) dbias[k] = T(0);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const int c0 = k / Kg * Cg;
          T g = dout[((int64_t(n) * s.K + k) * P + p) * Q + q];
          if (dbias) dbias[k] += g;
          for (int cg = 0; cg < Cg; ++cg)
            for (int r = 0; r < s.R; ++r) {
              int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int t = 0; t < s.S; ++t) {
                int w = q * s.stride - s.pad + t;
                if (w < 0 || w >= s.W) continue;
                dweight[((int64_t(k) * Cg + cg) * s.R + r) * s.S + t] +=
                    g * inp[((int64_t(n) * s.C + c0 + cg) * s.H + h) * s.W + w];
              }
            }
        }
}

#define RINGTRAIN_INSTANTIATE(T)                                                              \
  template void conv2d_forward<T>(T*, const T*, const T*, const T*, const Conv2dShape&);     \
  template void conv2d_backward_data<T>(T*, const T*, const T*, const Conv2dShape&);          \
  template void conv2d_backward_weight<T>(T*, T*, const T*, const T*, const Conv2dShape&);
RINGTRAIN_INSTANTIATE(float)
RINGTRAIN_INSTANTIATE(double)
#undef RINGTRAIN_INSTANTIATE

}  // namespace ringtrain::ops::ref
