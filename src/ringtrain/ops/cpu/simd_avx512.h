// 16-lane fp32 vector for the AVX-512 kernels (include only from *_avx512.cpp: needs -mavx512f).
// Every ISA's vector type has the same small interface, so the algorithms in kernels_impl.inc
// are written once and instantiated per ISA (STYLE.md: blis's micro-kernel/algorithm split).
#pragma once
#include <immintrin.h>

namespace ringtrain::ops::cpu {

struct VecAvx512 {
  static constexpr int L = 16;
  using R = __m512;
  using M = __mmask16;
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  // x > y ? a : b (false for NaN, as the scalar comparison)
  static R select_gt(R x, R y, R a, R b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_GT_OQ), b, a); }
  static R select_eq(R x, R y, R a, R b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ), b, a); }
  static float reduce_add(R v) {  // pairwise, in a fixed order (g++ 12 warns inside _mm512_reduce_add_ps)
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    for (int w = 8; w > 0; w /= 2)
      for (int i = 0; i < w; ++i) t[i] += t[i + w];
    return t[0];
  }
  // First n lanes (0 <= n <= L).
  static M mask(int n) { return M((1u << n) - 1u); }
  static R load_mask(const float* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_mask(float* p, R v, M m) { _mm512_mask_storeu_ps(p, m, v); }
};

}  // namespace ringtrain::ops::cpu
