// 16-bit floating-point storage types: bf16 (1-8-7, fp32's exponent range) and IEEE fp16 (1-5-10).
// Values are held as raw uint16_t bits; all math is done in fp32 (llm.c's floatX, mlx's AccT).
// Conversions from fp32 round to nearest, ties to even (relative error <= 2^-8 for bf16's 8 significant
// bits, <= 2^-11 for fp16's 11 in its normal range); NaN stays NaN (made quiet, sign kept), +-inf stays inf, values beyond fp16's range
// (|x| >= 65520) become inf, fp16 subnormals are produced and read exactly. The bulk functions use
// AVX-512 (bf16) and F16C (fp16) when the CPU has them and give the same bits as the scalar ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringtrain {

inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- bf16 -------------------------------------------------------------------------------------------
inline uint16_t float_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN: quiet, keep sign
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the correct rounding
  // (up to inf for values past bf16's largest finite 0x7f7f).
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_to_float(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// ---- fp16 -------------------------------------------------------------------------------------------
inline uint16_t float_to_fp16(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // inf, NaN (quiet bit set, top payload bits kept, as F16C does)
    return uint16_t(sign | 0x7c00u | (x > 0x7f800000u ? 0x0200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds past 65504
  if (x < 0x38800000u) {                                  // below 2^-14: fp16 subnormal or zero
    if (x <= 0x33000000u) return sign;                    // <= 2^-25 (the tie goes to even: 0)
    const uint32_t m = (x & 0x7fffffu) | 0x800000u;       // value = m * 2^(e-150)
    const int shift = 126 - int(x >> 23);                  // in units of 2^-24: m >> shift, 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  x -= 0x38000000u;  // re-bias the exponent 127 -> 15; rounding may carry into the exponent (correct)
  return uint16_t(sign | ((x + 0x0fffu + ((x >> 13) & 1u)) >> 13));
}
inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in fp32
    const float v = float(m) * 5.9604644775390625e-8f;
    return f32_from_bits(f32_bits(v) | sign);
  }
  if (e == 31) return f32_from_bits(sign | 0x7f800000u | (m << 13));
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}
inline float round_fp16(float x) { return fp16_to_float(float_to_fp16(x)); }

// ---- bulk (vectorised where the CPU allows; same bits as the scalar functions) -----------------------
void float_to_bf16(uint16_t* dst, const float* src, std::size_t n);
void bf16_to_float(float* dst, const uint16_t* src, std::size_t n);
void float_to_fp16(uint16_t* dst, const float* src, std::size_t n);
void fp16_to_float(float* dst, const uint16_t* src, std::size_t n);
// dst = float(16-bit(src)) in one pass; dst may equal src.
void round_bf16(float* dst, const float* src, std::size_t n);
void round_fp16(float* dst, const float* src, std::size_t n);

// The bf16 bulk functions on a given vector path (the ones above take the widest this CPU has), so tests
// can hold each path the CPU runs to the scalar bits. Throws Error for a path the CPU lacks.
enum class HalfSimd { Scalar, Avx2, Avx512 };
bool half_simd_available(HalfSimd path);
void float_to_bf16(HalfSimd path, uint16_t* dst, const float* src, std::size_t n);
void bf16_to_float(HalfSimd path, float* dst, const uint16_t* src, std::size_t n);
void round_bf16(HalfSimd path, float* dst, const float* src, std::size_t n);

}  // namespace ringtrain
