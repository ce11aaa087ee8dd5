// Bulk bf16/fp16 conversions: AVX-512 or AVX2 integer rounding for bf16 (vcvtneps2bf16 would flush fp32
// subnormals to zero, so it is kept for the kernels' inner loops only) and F16C for fp16, chosen once
// from cpuid; scalar loops otherwise and for the tails. Same bits on every path (tests/test_half.cpp).
// The AVX2 path matters on CPUs without AVX512_BF16, where --precision bf16 rounds every conv and linear
// operand with round_bf16: the scalar loop was 6.4% of the instructions of a resnet18 run (callgrind).
#include "ringtrain/core/half.h"

#include <immintrin.h>

#include <cstdlib>
#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain {
namespace {

bool have_avx512() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return ok;
}
bool have_avx2() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
  }();
  return ok;
}
bool have_f16c() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  }();
  return ok;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw"))) __m512i bf16_bits_avx512(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(r, isnan, nan);
}

__attribute__((target("avx512f,avx512bw"))) std::size_t to_bf16_avx512(uint16_t* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(bf16_bits_avx512(_mm512_loadu_ps(src + i))));
  return i;
}
__attribute__((target("avx512f,avx512bw"))) std::size_t from_bf16_avx512(float* dst, const uint16_t* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
  return i;
}
__attribute__((target("avx512f,avx512bw"))) std::size_t round_bf16_avx512(float* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits_avx512(_mm512_loadu_ps(src + i)), 16)));
  return i;
}
__attribute__((target("avx,f16c"))) std::size_t to_fp16_f16c(uint16_t* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  return i;
}
__attribute__((target("avx,f16c"))) std::size_t from_fp16_f16c(float* dst, const uint16_t* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  return i;
}
__attribute__((target("avx,f16c"))) std::size_t round_fp16_f16c(float* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
  return i;
}
// The same rounding on 8 lanes: the bf16 bits in the low 16 bits of each 32-bit lane.
__attribute__((target("avx2"))) __m256i bf16_bits_avx2(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, nan, isnan);
}
__attribute__((target("avx2"))) std::size_t to_bf16_avx2(uint16_t* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16_bits_avx2(_mm256_loadu_ps(src + i)), b = bf16_bits_avx2(_mm256_loadu_ps(src + i + 8));
    // packus works within 128-bit halves: a0 b0 a1 b1 -> reorder the 64-bit quarters to a0 a1 b0 b1.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  return i;
}
__attribute__((target("avx2"))) std::size_t from_bf16_avx2(float* dst, const uint16_t* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  return i;
}
__attribute__((target("avx2"))) std::size_t round_bf16_avx2(float* dst, const float* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits_avx2(_mm256_loadu_ps(src + i)), 16)));
  return i;
}
#pragma GCC diagnostic pop

}  // namespace

bool half_simd_available(HalfSimd path) {
  return path == HalfSimd::Scalar || (path == HalfSimd::Avx2 && have_avx2()) || (path == HalfSimd::Avx512 && have_avx512());
}

namespace {
// The widest path the CPU has, capped by RINGTRAIN_ISA as the kernels are (ops/kernels.h), so a run forced to
// avx2 on an AVX-512 machine converts as an AVX2-only CPU would.
HalfSimd widest() {
  static const HalfSimd w = [] {
    HalfSimd best = have_avx512() ? HalfSimd::Avx512 : have_avx2() ? HalfSimd::Avx2 : HalfSimd::Scalar;
    const char* env = std::getenv("RINGTRAIN_ISA");
    const std::string isa = env ? env : "";
    if (isa == "avx2" && best == HalfSimd::Avx512) best = HalfSimd::Avx2;
    if (isa == "scalar" || isa == "ref") best = HalfSimd::Scalar;
    return best;
  }();
  return w;
}
void check_path(HalfSimd path) {  // (no message built on the hot path: a step must not allocate)
  if (!half_simd_available(path)) throw Error("bf16 conversions: this CPU lacks the requested vector path");
}
}  // namespace

void float_to_bf16(HalfSimd path, uint16_t* dst, const float* src, std::size_t n) {
  check_path(path);
  std::size_t i = path == HalfSimd::Avx512 ? to_bf16_avx512(dst, src, n) : path == HalfSimd::Avx2 ? to_bf16_avx2(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}
void bf16_to_float(HalfSimd path, float* dst, const uint16_t* src, std::size_t n) {
  check_path(path);
  std::size_t i = path == HalfSimd::Avx512 ? from_bf16_avx512(dst, src, n) : path == HalfSimd::Avx2 ? from_bf16_avx2(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}
void round_bf16(HalfSimd path, float* dst, const float* src, std::size_t n) {
  check_path(path);
  std::size_t i = path == HalfSimd::Avx512 ? round_bf16_avx512(dst, src, n) : path == HalfSimd::Avx2 ? round_bf16_avx2(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = round_bf16(src[i]);
}
void float_to_bf16(uint16_t* dst, const float* src, std::size_t n) { float_to_bf16(widest(), dst, src, n); }
void bf16_to_float(float* dst, const uint16_t* src, std::size_t n) { bf16_to_float(widest(), dst, src, n); }
void round_bf16(float* dst, const float* src, std::size_t n) { round_bf16(widest(), dst, src, n); }
void float_to_fp16(uint16_t* dst, const float* src, std::size_t n) {
  std::size_t i = have_f16c() ? to_fp16_f16c(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = float_to_fp16(src[i]);
}
void fp16_to_float(float* dst, const uint16_t* src, std::size_t n) {
  std::size_t i = have_f16c() ? from_fp16_f16c(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = fp16_to_float(src[i]);
}
void round_fp16(float* dst, const float* src, std::size_t n) {
  std::size_t i = have_f16c() ? round_fp16_f16c(dst, src, n) : 0;
  for (; i < n; ++i) dst[i] = round_fp16(src[i]);
}

}  // namespace ringtrain
