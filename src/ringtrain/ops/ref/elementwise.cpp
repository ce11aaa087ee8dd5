// Reference residual add and dropout (ops/elementwise.h).
#include "ringtrain/ops/elementwise.h"

#include <cstddef>

namespace ringtrain::ops::ref {

template <typename T>
void add_forward(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void dropout_forward(T* out, const T* x, const DropoutShape& s) {
  const int64_t total = int64_t(s.N) * s.F;
  if (s.p <= 0.0) {
    for (int64_t i = 0; i < total; ++i) out[i] = x[i];
    return;
  }
  // The scale is rounded to T once, as torch multiplies by a float 1 / (1 - p).
  const T scale = s.p >= 1.0 ? T(0) : T(1.0 / (1.0 - s.p));
  const uint64_t threshold = dropout_threshold(s.p);
  for (int n = 0; n < s.N; ++n) {
    const uint64_t key = dropout_sample_key(s.seed, s.salt, s.step, s.sample_id(n));
    for (int64_t e = 0; e < s.F; ++e) {
      const int64_t i = int64_t(n) * s.F + e;
      out[i] = s.p < 1.0 && dropout_keep(key, e, threshold) ? x[i] * scale : T(0);
    }
  }
}

template <typename T>
void transpose_samples(T* dst, const T* src, int N, int rows, int cols) {
  const std::size_t per = std::size_t(rows) * cols;
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) dst[n * per + std::size_t(j) * rows + i] = src[n * per + std::size_t(i) * cols + j];
}

template void add_forward<float>(float*, const float*, const float*, int64_t);
template void add_forward<double>(double*, const double*, const double*, int64_t);
template void dropout_forward<float>(float*, const float*, const DropoutShape&);
template void dropout_forward<double>(double*, const double*, const DropoutShape&);
template void transpose_samples<float>(float*, const float*, int, int, int);
template void transpose_samples<double>(double*, const double*, int, int, int);

}  // namespace ringtrain::ops::ref
