// 16-lane fp32 vector for the AVX-512 kernels (include only from *_avx512.cpp: needs -mavx512f).
// Every ISA's vector type has the same small interface, so the algorithms in kernels_impl.inc
// are written once and instantiated per ISA (STYLE.md: blis's micro-kernel/algorithm split).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ringtrain::ops::cpu {

// g++ 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wuninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

struct VecAvx512 {
  static constexpr int L = 16;
  using R = __m512;
  using M = __mmask16;
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  // p[0], p[stride], ..., p[15 * stride] (a column of a row-major matrix), and the store back into one.
  static R gather_stride(const float* p, int stride) {
    return _mm512_i32gather_ps(_mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                  _mm512_set1_epi32(stride)),
                               p, 4);
  }
  static void scatter_stride(float* p, int stride, R v) {
    _mm512_i32scatter_ps(p,
                         _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(stride)),
                         v, 4);
  }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  // a * b, rounded: the empty asm keeps the compiler from fusing it into a later add (g++ contracts
  // a * b + c into an FMA by default in C++), for kernels that must match scalar code bit for bit.
  static R mul_rounded(R a, R b) {
    R p = mul(a, b);
    __asm__("" : "+v"(p));
    return p;
  }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  // x > y ? a : b (false for NaN, as the scalar comparison)
  static R select_gt(R x, R y, R a, R b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_GT_OQ), b, a); }
  static R select_eq(R x, R y, R a, R b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ), b, a); }
  // x op y ? a : 0, and x op y ? 0 : a (false for NaN).
  static R where_eq(R x, R y, R a) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ), a); }
  static R where_gt(R x, R y, R a) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, y, _CMP_GT_OQ), a); }
  static R unless_eq(R x, R y, R a) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, y, _CMP_NEQ_UQ), a); }
  static R unless_gt(R x, R y, R a) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, y, _CMP_NGT_UQ), a); }
  // a > b ? a : b and a < b ? a : b (b when either is NaN: the instructions' rule).
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  // Max-pool's rule (ops/pool.h): v replaces best if v > best, or if v is NaN and best is not. Two compares: the
  // unordered not-less-or-equal (v > best or either NaN), under the mask of a non-NaN best.
  static M take_max(R v, R best) {
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), v, best, _CMP_NLE_UQ);
  }
  static R blend(M m, R a, R b) { return _mm512_mask_blend_ps(m, b, a); }  // m ? a : b, per lane
  // The first n lanes (small non-negative integers, e.g. max-pool's argmax) as bytes, and back.
  static void store_bytes(uint8_t* p, R v, int n) { _mm512_mask_cvtepi32_storeu_epi8(p, mask(n), _mm512_cvttps_epi32(v)); }
  static R load_bytes(const uint8_t* p, int n) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask(n), p)));
  }
  // Sums kept in double (batch norm's statistics): acc[0..L) += a, or += a * b (a float product is exact in
  // double, so only the sums round).
  static void add_to_double(double* acc, R a) {
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
    _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
  }
  static void fma_to_double(double* acc, R a, R b) {
    const __m512d alo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    const __m512d ahi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m512d blo = _mm512_cvtps_pd(_mm512_castps512_ps256(b));
    const __m512d bhi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)));
    _mm512_storeu_pd(acc, _mm512_fmadd_pd(alo, blo, _mm512_loadu_pd(acc)));
    _mm512_storeu_pd(acc + 8, _mm512_fmadd_pd(ahi, bhi, _mm512_loadu_pd(acc + 8)));
  }
  static float reduce_add(R v) {  // pairwise, in a fixed order (g++ 12 warns inside _mm512_reduce_add_ps)
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    for (int w = 8; w > 0; w /= 2)
      for (int i = 0; i < w; ++i) t[i] += t[i + w];
    return t[0];
  }
  // x rounded to bf16 (nearest even; NaN made quiet), as fp32: core/half.h's round_bf16, bit for bit (integer
  // rounding, subnormals kept), for the bf16 builds' operands and sums of rounded values.
  static R round_bf16(R x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    const __m512i h = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), nan);
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  // A permutation within the vector: permute(x, perm(idx)) has x[idx[l]] in lane l, and 0 where idx[l] < 0 (the
  // depthwise kernels' shifts within the planes a vector holds; zeroed, not multiplied by a zero weight, so an
  // infinity outside the window stays out).
  struct Perm {
    __m512i idx;
    __mmask16 keep;
  };
  static Perm perm(const int32_t* idx) {
    const __m512i i = _mm512_loadu_si512(idx);
    return {i, _mm512_cmpge_epi32_mask(i, _mm512_setzero_si512())};
  }
  static R permute(R x, Perm p) { return _mm512_maskz_permutexvar_ps(p.keep, p.idx, x); }
  // First n lanes (0 <= n <= L).
  static M mask(int n) { return M((1u << n) - 1u); }
  // The lanes where on[l] > 0 (a mask of any shape, made once, for load_mask / store_mask).
  static M mask_where(const float* on) { return _mm512_cmp_ps_mask(_mm512_loadu_ps(on), _mm512_setzero_ps(), _CMP_GT_OQ); }
  static R load_mask(const float* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_mask(float* p, R v, M m) { _mm512_mask_storeu_ps(p, m, v); }
  // dst[j * ldd + i] = src[i * lds + j] for a 16 x 16 tile (unpack, shuffle, two 128-bit-lane stages).
  [[gnu::always_inline]] static inline void transpose(const float* src, std::size_t lds, float* dst, std::size_t ldd) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    transpose_regs(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
  }
  // The same in registers: r[j] <- lane j of r[0..16), for tiles whose rows do not sit at one stride.
  // (Forced inline, as on AVX2: see simd_avx2.h.)
  [[gnu::always_inline]] static inline void transpose_regs(__m512* r) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
      r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
        t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
      }
    for (int j = 0; j < 8; ++j) {
      r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
      r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
    }
  }
};

#pragma GCC diagnostic pop

}  // namespace ringtrain::ops::cpu
