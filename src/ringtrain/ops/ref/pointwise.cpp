// Reference ReLU6 and exact GELU (ops/pointwise.h), evaluated in double whatever T is.
#include "ringtrain/ops/pointwise.h"

#include <cmath>

namespace ringtrain::ops::ref {

template <typename T>
void relu6_forward(T* out, const T* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] > T(0) ? (inp[i] < T(6) ? inp[i] : T(6)) : T(0);
}

template <typename T>
void relu6_backward(T* dinp, const T* dout, const T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = out[i] > T(0) && out[i] < T(6) ? dout[i] : T(0);
}

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = T(0.5 * x * std::erfc(-x * M_SQRT1_2));  // erfc: no cancellation in 1 + erf for x << 0
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* dout, const T* inp, const T*, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double cdf = 0.5 * std::erfc(-x * M_SQRT1_2), pdf = std::exp(-0.5 * x * x) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
    dinp[i] = T(double(dout[i]) * (cdf + x * pdf));
  }
}

#define RINGTRAIN_PW(T)                                            \
  template void relu6_forward<T>(T*, const T*, int64_t);           \
  template void relu6_backward<T>(T*, const T*, const T*, int64_t); \
  template void gelu_forward<T>(T*, const T*, int64_t);            \
  template void gelu_backward<T>(T*, const T*, const T*, const T*, int64_t);
RINGTRAIN_PW(float)
RINGTRAIN_PW(double)
#undef RINGTRAIN_PW

}  // namespace ringtrain::ops::ref
