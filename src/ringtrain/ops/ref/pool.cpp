// Reference max pooling (window k, stride k).
#include "ringtrain/ops/pool.h"

#include <cmath>

namespace ringtrain::ops::ref {

template <typename T>
void maxpool2d_forward(T* out, uint8_t* argmax, const T* inp, const PoolShape& s) {
  const int P = s.P(), Q = s.Q();
  for (int64_t plane = 0; plane < s.NC; ++plane) {
    const T* in = inp + plane * s.H * s.W;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        T best = in[(p * s.k) * s.W + q * s.k];
        int best_at = 0;
        for (int dy = 0; dy < s.k; ++dy)
          for (int dx = 0; dx < s.k; ++dx) {
            T v = in[(p * s.k + dy) * s.W + q * s.k + dx];
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
  const int P = s.P(), Q = s.Q();
  for (int64_t i = 0; i < int64_t(s.NC) * s.H * s.W; ++i) dinp[i] = T(0);
  for (int64_t plane = 0; plane < s.NC; ++plane)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        int64_t o = (plane * P + p) * Q + q;
        int dy = argmax[o] / s.k, dx = argmax[o] % s.k;
        dinp[plane * s.H * s.W + (p * s.k + dy) * s.W + q * s.k + dx] += dout[o];
      }
}

template void maxpool2d_forward<float>(float*, uint8_t*, const float*, const PoolShape&);
template void maxpool2d_forward<double>(double*, uint8_t*, const double*, const PoolShape&);
template void maxpool2d_backward<float>(float*, const float*, const uint8_t*, const PoolShape&);
template void maxpool2d_backward<double>(double*, const double*, const uint8_t*, const PoolShape&);

}  // namespace ringtrain::ops::ref
