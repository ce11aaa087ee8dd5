// 8-lane fp32 vector for the AVX2+FMA kernels (include only from *_avx2.cpp: needs -mavx2 -mfma).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ringtrain::ops::cpu {

struct VecAvx2 {
  static constexpr int L = 8;
  using R = __m256;
  using M = __m256i;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  // p[0], p[stride], ..., p[7 * stride] (a column of a row-major matrix), and the store back into one (AVX2
  // has no scatter: eight stores).
  static R gather_stride(const float* p, int stride) {
    return _mm256_i32gather_ps(p, _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride)),
                               4);
  }
  static void scatter_stride(float* p, int stride, R v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    for (int i = 0; i < 8; ++i) p[std::ptrdiff_t(i) * stride] = t[i];
  }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  // a * b, rounded: the empty asm keeps the compiler from fusing it into a later add (g++ contracts
  // a * b + c into an FMA by default in C++), for kernels that must match scalar code bit for bit.
  static R mul_rounded(R a, R b) {
    R p = mul(a, b);
    __asm__("" : "+x"(p));
    return p;
  }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R select_gt(R x, R y, R a, R b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, y, _CMP_GT_OQ)); }
  static R select_eq(R x, R y, R a, R b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, y, _CMP_EQ_OQ)); }
  // The same against zero with a compare and one logic op (vblendvps is more than one uop on Intel's cores):
  // x op y ? a : 0, and x op y ? 0 : a (false for NaN, as the scalar comparison).
  static R where_eq(R x, R y, R a) { return _mm256_and_ps(_mm256_cmp_ps(x, y, _CMP_EQ_OQ), a); }
  static R where_gt(R x, R y, R a) { return _mm256_and_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), a); }
  static R unless_eq(R x, R y, R a) { return _mm256_andnot_ps(_mm256_cmp_ps(x, y, _CMP_EQ_OQ), a); }
  static R unless_gt(R x, R y, R a) { return _mm256_andnot_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), a); }
  // a > b ? a : b and a < b ? a : b (b when either is NaN: the instructions' rule).
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  // Max-pool's rule (ops/pool.h): v replaces best if v > best, or if v is NaN and best is not.
  static M take_max(R v, R best) {
    return _mm256_castps_si256(_mm256_and_ps(_mm256_cmp_ps(v, best, _CMP_NLE_UQ), _mm256_cmp_ps(best, best, _CMP_ORD_Q)));
  }
  static R blend(M m, R a, R b) { return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m)); }  // m ? a : b, per lane
  // The first n lanes (small non-negative integers, e.g. max-pool's argmax) as bytes, and back.
  static void store_bytes(uint8_t* p, R v, int n) {
    const __m256i i = _mm256_cvttps_epi32(v);
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    const __m128i b = _mm_packus_epi16(w, w);
    if (n == 8) return _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
    alignas(16) uint8_t t[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
    for (int j = 0; j < n; ++j) p[j] = t[j];
  }
  static R load_bytes(const uint8_t* p, int n) {
    __m128i b;
    if (n == 8) {
      b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    } else {
      alignas(16) uint8_t t[16] = {};
      for (int j = 0; j < n; ++j) t[j] = p[j];
      b = _mm_load_si128(reinterpret_cast<const __m128i*>(t));
    }
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  }
  // Sums kept in double (batch norm's statistics): acc[0..L) += a, or += a * b (a float product is exact in
  // double, so only the sums round).
  static void add_to_double(double* acc, R a) {
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), lo));
    _mm256_storeu_pd(acc + 4, _mm256_add_pd(_mm256_loadu_pd(acc + 4), hi));
  }
  static void fma_to_double(double* acc, R a, R b) {
    const __m256d alo = _mm256_cvtps_pd(_mm256_castps256_ps128(a)), ahi = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    const __m256d blo = _mm256_cvtps_pd(_mm256_castps256_ps128(b)), bhi = _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1));
    _mm256_storeu_pd(acc, _mm256_fmadd_pd(alo, blo, _mm256_loadu_pd(acc)));
    _mm256_storeu_pd(acc + 4, _mm256_fmadd_pd(ahi, bhi, _mm256_loadu_pd(acc + 4)));
  }
  static float reduce_add(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // A permutation within the vector: lane l of permute(x, perm(idx)) is x[idx[l]], or 0 where idx[l] < 0
  // (zeroed by a mask, not multiplied by a zero weight, so an infinity outside the window stays out).
  struct Perm {
    __m256i idx;
    __m256 keep;
  };
  static Perm perm(const int32_t* idx) {
    const __m256i i = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
    return {i, _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1)))};
  }
  static R permute(R x, Perm p) { return _mm256_and_ps(_mm256_permutevar8x32_ps(x, p.idx), p.keep); }
  static M mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // The lanes where on[l] > 0 (a mask of any shape, made once, for load_mask / store_mask).
  static M mask_where(const float* on) {
    return _mm256_castps_si256(_mm256_cmp_ps(_mm256_loadu_ps(on), _mm256_setzero_ps(), _CMP_GT_OQ));
  }
  static R load_mask(const float* p, M m) { return _mm256_maskload_ps(p, m); }
  // vmaskmovps to memory is microcoded on AMD Zen 2/3: ~18 cycles a store on Zen 3 against ~2 for a plain one
  // or for the pieces below (a loop of 4 independent stores a lane count, 2026-12-07). Nearly every mask a kernel
  // stores through is a prefix (mask(n): row and tile ends), so those go out as a 4-, a 2- and a 1-float store;
  // any other shape keeps the masked store.
  static void store_mask(float* p, R v, M m) {
    const unsigned bits = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(m)));
    if ((bits & (bits + 1)) != 0) return _mm256_maskstore_ps(p, m, v);  // not lanes 0..n-1
    store_first(p, v, __builtin_popcount(bits));
  }
  // p[0..n) <- lanes 0..n-1 of v (0 <= n <= 8).
  static void store_first(float* p, R v, int n) {
    if (n == L) return _mm256_storeu_ps(p, v);
    __m128 part = _mm256_castps256_ps128(v);
    if (n >= 4) {
      _mm_storeu_ps(p, part);
      part = _mm256_extractf128_ps(v, 1);
      p += 4, n -= 4;
    }
    if (n >= 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
      part = _mm_movehl_ps(part, part);
      p += 2, n -= 2;
    }
    if (n == 1) _mm_store_ss(p, part);
  }
  // dst[j * ldd + i] = src[i * lds + j] for an 8 x 8 tile.
  [[gnu::always_inline]] static inline void transpose(const float* src, std::size_t lds, float* dst, std::size_t ldd) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
    transpose_regs(r);
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, r[i]);
  }
  // The same in registers: r[j] <- lane j of r[0..8), for tiles whose rows do not sit at one stride.
  // (Both transposes are forced inline: in the larger bf16 translation units GCC kept them out of line, the
  // registers made a round trip through memory, and the depthwise passes ran up to 1.5x slower.)
  [[gnu::always_inline]] static inline void transpose_regs(__m256* r) {
    __m256 t[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
      r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20);
      t[4 + j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31);
    }
    for (int i = 0; i < 8; ++i) r[i] = t[i];
  }
};

}  // namespace ringtrain::ops::cpu
