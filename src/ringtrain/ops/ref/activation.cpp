// Reference ReLU.
#include "ringtrain/ops/activation.h"

namespace ringtrain::ops::ref {

template <typename T>
void relu_forward(T* out, const T* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] > T(0) ? inp[i] : T(0);
}

template <typename T>
void relu_backward(T* dinp, const T* dout, const T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = out[i] > T(0) ? dout[i] : T(0);
}

template void relu_forward<float>(float*, const float*, int64_t);
template void relu_forward<double>(double*, const double*, int64_t);
template void relu_backward<float>(float*, const float*, const float*, int64_t);
template void relu_backward<double>(double*, const double*, const double*, int64_t);

}  // namespace ringtrain::ops::ref
