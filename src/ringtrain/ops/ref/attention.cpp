// Reference multi-head self-attention core (ops/attention.h): direct loops per sample and head.
#include "ringtrain/ops/attention.h"

#include <cmath>
#include <cstdint>

namespace ringtrain::ops::ref {

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const AttentionShape& s) {
  const int hd = s.hd(), ld = 3 * s.D;
  const T scale = T(1.0 / std::sqrt(double(hd)));
  for (int n = 0; n < s.N; ++n)
    for (int h = 0; h < s.H; ++h) {
      const T* q = qkv + int64_t(n) * s.T * ld + h * hd;
      const T* k = q + s.D;
      const T* v = q + 2 * s.D;
      T* P = probs + (int64_t(n) * s.H + h) * s.T * s.T;
      for (int i = 0; i < s.T; ++i) {
        T* p = P + int64_t(i) * s.T;
        T maxv = T(-INFINITY);
        for (int j = 0; j < s.T; ++j) {
          T dot = T(0);
          for (int d = 0; d < hd; ++d) dot += q[int64_t(i) * ld + d] * k[int64_t(j) * ld + d];
          p[j] = dot * scale;
          maxv = p[j] > maxv ? p[j] : maxv;
        }
        T sum = T(0);
        for (int j = 0; j < s.T; ++j) sum += (p[j] = std::exp(p[j] - maxv));
        for (int j = 0; j < s.T; ++j) p[j] /= sum;
        T* o = out + (int64_t(n) * s.T + i) * s.D + h * hd;
        for (int d = 0; d < hd; ++d) {
          T acc = T(0);
          for (int j = 0; j < s.T; ++j) acc += p[j] * v[int64_t(j) * ld + d];
          o[d] = acc;
        }
      }
    }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, const AttentionShape& s) {
  const int hd = s.hd(), ld = 3 * s.D;
  const T scale = T(1.0 / std::sqrt(double(hd)));
  for (int64_t i = 0; i < int64_t(s.N) * s.T * ld; ++i) dqkv[i] = T(0);
  for (int n = 0; n < s.N; ++n)
    for (int h = 0; h < s.H; ++h) {
      const int64_t base = int64_t(n) * s.T * ld + h * hd;
      const T *q = qkv + base, *k = q + s.D, *v = q + 2 * s.D;
      T *dq = dqkv + base, *dk = dq + s.D, *dv = dq + 2 * s.D;
      const T* P = probs + (int64_t(n) * s.H + h) * s.T * s.T;
      const T* dO = dout + int64_t(n) * s.T * s.D + h * hd;
      for (int i = 0; i < s.T; ++i) {
        const T* p = P + int64_t(i) * s.T;
        const T* g = dO + int64_t(i) * s.D;
        // dP_ij = g . v_j; dS_ij = p_ij (dP_ij - sum_j p_ij dP_ij) * scale
        T rowsum = T(0);
        for (int j = 0; j < s.T; ++j) {
          T dp = T(0);
          for (int d = 0; d < hd; ++d) dp += g[d] * v[int64_t(j) * ld + d];
          rowsum += p[j] * dp;
        }
        for (int j = 0; j < s.T; ++j) {
          T dp = T(0);
          for (int d = 0; d < hd; ++d) dp += g[d] * v[int64_t(j) * ld + d];
          const T ds = p[j] * (dp - rowsum) * scale;
          for (int d = 0; d < hd; ++d) {
            dq[int64_t(i) * ld + d] += ds * k[int64_t(j) * ld + d];
            dk[int64_t(j) * ld + d] += ds * q[int64_t(i) * ld + d];
            dv[int64_t(j) * ld + d] += p[j] * g[d];
          }
        }
      }
    }
}

template void attention_forward<float>(float*, float*, const float*, const AttentionShape&);
template void attention_forward<double>(double*, double*, const double*, const AttentionShape&);
template void attention_backward<float>(float*, const float*, const float*, const float*, const AttentionShape&);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         const AttentionShape&);

}  // namespace ringtrain::ops::ref
