// Reference linear layer.
#include "ringtrain/ops/linear.h"

#include <cstdint>

namespace ringtrain::ops::ref {

template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, const LinearShape& s) {
  for (int n = 0; n < s.N; ++n)
    for (int o = 0; o < s.O; ++o) {
      T acc = bias ? bias[o] : T(0);
      for (int i = 0; i < s.I; ++i) acc += inp[int64_t(n) * s.I + i] * weight[int64_t(o) * s.I + i];
      out[int64_t(n) * s.O + o] = acc;
    }
}

template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     const LinearShape& s) {
  if (dinp)
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.I; ++i) {
        T acc = T(0);
        for (int o = 0; o < s.O; ++o) acc += dout[int64_t(n) * s.O + o] * weight[int64_t(o) * s.I + i];
        dinp[int64_t(n) * s.I + i] = acc;
      }
  for (int o = 0; o < s.O; ++o) {
    for (int i = 0; i < s.I; ++i) {
      T acc = T(0);
      for (int n = 0; n < s.N; ++n) acc += dout[int64_t(n) * s.O + o] * inp[int64_t(n) * s.I + i];
      dweight[int64_t(o) * s.I + i] = acc;
    }
    if (dbias) {
      T acc = T(0);
      for (int n = 0; n < s.N; ++n) acc += dout[int64_t(n) * s.O + o];
      dbias[o] = acc;
    }
  }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, const LinearShape&);
template void linear_forward<double>(double*, const double*, const double*, const double*, const LinearShape&);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                     const LinearShape&);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      const LinearShape&);

}  // namespace ringtrain::ops::ref
