// Reference max pooling (window k, any stride, -inf padding) and global average pooling.
#include "ringtrain/ops/pool.h"

#include <algorithm>
#include <cmath>

namespace ringtrain::ops::ref {

template <typename T>
void maxpool2d_forward(T* out, uint8_t* argmax, const T* inp, const PoolShape& s) {
  const int P = s.P(), Q = s.Q(), st = s.st();
  for (int64_t plane = 0; plane < s.NC; ++plane) {
    const T* in = inp + plane * s.H * s.W;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const int h0 = p * st - s.pad, w0 = q * st - s.pad;
        // The window's part inside the input; padded positions are -inf and never win.
        const int dy0 = std::max(0, -h0), dy1 = std::min(s.k, s.H - h0);
        const int dx0 = std::max(0, -w0), dx1 = std::min(s.k, s.W - w0);
        T best = in[(h0 + dy0) * s.W + w0 + dx0];
        int best_at = dy0 * s.k + dx0;
        for (int dy = dy0; dy < dy1; ++dy)
          for (int dx = dx0; dx < dx1; ++dx) {
            T v = in[(h0 + dy) * s.W + w0 + dx];
            if (v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              best_at = dy * s.k + dx;
            }
          }
        out[(plane * P + p) * Q + q] = best;
        argmax[(plane * P + p) * Q + q] = uint8_t(best_at);
      }
  }
}

template <typename T>
void maxpool2d_backward(T* dinp, const T* dout, const uint8_t* argmax, const PoolShape& s) {
  const int P = s.P(), Q = s.Q(), st = s.st();
  for (int64_t i = 0; i < int64_t(s.NC) * s.H * s.W; ++i) dinp[i] = T(0);
  for (int64_t plane = 0; plane < s.NC; ++plane)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        int64_t o = (plane * P + p) * Q + q;
        int dy = argmax[o] / s.k, dx = argmax[o] % s.k;
        dinp[plane * s.H * s.W + (p * st - s.pad + dy) * s.W + q * st - s.pad + dx] += dout[o];
      }
}

template <typename T>
void avgpool_global_forward(T* out, const T* inp, int64_t NC, int HW) {
  for (int64_t plane = 0; plane < NC; ++plane) {
    T acc = T(0);
    for (int i = 0; i < HW; ++i) acc += inp[plane * HW + i];
    out[plane] = acc / T(HW);
  }
}

template <typename T>
void avgpool_global_backward(T* dinp, const T* dout, int64_t NC, int HW) {
  for (int64_t plane = 0; plane < NC; ++plane) {
    const T g = dout[plane] / T(HW);
    for (int i = 0; i < HW; ++i) dinp[plane * HW + i] = g;
  }
}

#define RINGTRAIN_INSTANTIATE(T)                                                                \
  template void maxpool2d_forward<T>(T*, uint8_t*, const T*, const PoolShape&);                \
  template void maxpool2d_backward<T>(T*, const T*, const uint8_t*, const PoolShape&);         \
  template void avgpool_global_forward<T>(T*, const T*, int64_t, int);                          \
  template void avgpool_global_backward<T>(T*, const T*, int64_t, int);
RINGTRAIN_INSTANTIATE(float)
RINGTRAIN_INSTANTIATE(double)
#undef RINGTRAIN_INSTANTIATE

}  // namespace ringtrain::ops::ref
