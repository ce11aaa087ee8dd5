// bf16 / fp16 conversions (core/half.h): round to nearest even checked against an independent oracle
// (the two neighbouring 16-bit values, compared in double), NaN / inf / overflow / subnormal handling,
// every fp16 bit pattern round-tripped, and the vectorised bulk functions bit-identical to the scalar
// ones at every length (tails included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"

namespace ringtrain {
namespace {

// Oracle: the nearest of the representable neighbours; ties to the even bit pattern.
template <class ToFloat>
uint16_t nearest(double x, uint16_t lo, uint16_t hi, ToFloat to_float) {
  const double a = to_float(lo), b = to_float(hi);
  const double da = std::fabs(x - a), db = std::fabs(b - x);
  if (da < db) return lo;
  if (db < da) return hi;
  return (lo & 1u) ? hi : lo;
}

TEST(Half, Bf16RoundsToNearestEvenOnRandomBitPatterns) {
  Rng rng(1);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng.next_u32();
    const float x = f32_from_bits(u);
    const uint16_t got = float_to_bf16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(got))) << std::hex << u;
      ASSERT_EQ(got & 0x8000u, (u >> 16) & 0x8000u);
      continue;
    }
    const uint16_t lo = uint16_t(u >> 16);  // truncation: toward zero
    const uint16_t hi = uint16_t(lo + 1);   // next away from zero (may be inf)
    const uint16_t want = (u & 0xffffu) == 0 ? lo : nearest(double(x), lo, hi, [](uint16_t h) {
      // Past the largest finite value, IEEE rounding treats inf as the next step, 2^128.
      const float f = bf16_to_float(h);
      return std::isinf(f) ? std::copysign(std::ldexp(1.0, 128), double(f)) : double(f);
    });
    ASSERT_EQ(got, want) << std::hex << "x bits " << u;
    if (std::isfinite(bf16_to_float(got)) && x != 0.0f && std::fabs(x) >= 1.1754944e-38f)
      ASSERT_LE(std::fabs(double(bf16_to_float(got)) - x), std::ldexp(std::fabs(double(x)), -8));
  }
}

TEST(Half, Bf16Specials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(inf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A signalling NaN whose payload sits only in the dropped bits must not become inf.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f32_from_bits(0x7f800001u)))));
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past bf16's largest
  EXPECT_EQ(float_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);          // tie -> even (down)
  EXPECT_EQ(float_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);          // tie -> even (up)
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
}

TEST(Half, Fp16RoundsToNearestEvenOnRandomFloats) {
  Rng rng(2);
  for (int i = 0; i < 2000000; ++i) {
    // Exponents around fp16's range (subnormals, normals, overflow), random significands.
    const int e = int(rng.below(50)) - 30;
    const float x = std::ldexp(1.0f + rng.uniform(), e) * (rng.below(2) ? -1.0f : 1.0f);
    const uint16_t got = float_to_fp16(x);
    // Oracle by search: the fp16 values bracketing x.
    const double ax = std::fabs(double(x));
    const uint16_t sign = x < 0 ? 0x8000 : 0;
    uint16_t lo = 0;
    {
      uint16_t a = 0, b = 0x7c00;  // largest pattern with value <= ax (0x7c00 = inf)
      while (a < b) {
        const uint16_t mid = uint16_t((a + b + 1) / 2);
        if (double(fp16_to_float(mid)) <= ax) a = mid; else b = uint16_t(mid - 1);
      }
      lo = a;
    }
    uint16_t want;
    if (lo == 0x7bff && ax >= 65520.0) want = 0x7c00;
    else if (double(fp16_to_float(lo)) == ax) want = lo;
    else if (lo == 0x7bff) want = ax >= 65520.0 ? 0x7c00 : 0x7bff;
    else want = nearest(ax, lo, uint16_t(lo + 1), [](uint16_t h) { return double(fp16_to_float(h)); });
    ASSERT_EQ(got, uint16_t(want | sign)) << "x = " << x;
  }
}

TEST(Half, Fp16EveryPatternRoundTripsAndSpecials) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = fp16_to_float(uint16_t(h));
    if (std::isnan(x)) {
      ASSERT_EQ((h >> 10) & 0x1f, 0x1fu);
      ASSERT_TRUE(std::isnan(fp16_to_float(float_to_fp16(x))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(x), uint16_t(h)) << std::hex << h;
  }
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);                  // overflow to inf
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);     // tie with 2^-24 -> even (0)
  EXPECT_EQ(float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_fp16(1e-10f), 0x0000);                    // underflow: why fp16 needs loss scaling
}

TEST(Half, BulkConversionsMatchScalarAtEveryLength) {
  Rng rng(3);
  for (std::size_t n : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 100u, 1027u}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
      const uint32_t pick = rng.below(8);
      x[i] = pick == 0 ? f32_from_bits(rng.next_u32())                       // anything, NaN and inf included
             : pick == 1 ? std::ldexp(rng.uniform(-1.0f, 1.0f), -20)        // fp16 subnormal range
                         : rng.uniform(-70000.0f, 70000.0f);
    }
    std::vector<uint16_t> b(n), h(n);
    std::vector<float> bf(n), hf(n), rb(n), rh(n);
    float_to_bf16(b.data(), x.data(), n);
    float_to_fp16(h.data(), x.data(), n);
    bf16_to_float(bf.data(), b.data(), n);
    fp16_to_float(hf.data(), h.data(), n);
    round_bf16(rb.data(), x.data(), n);
    round_fp16(rh.data(), x.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(i);
      const bool nan = std::isnan(x[i]);
      if (!nan) {
        ASSERT_EQ(b[i], float_to_bf16(x[i]));
        ASSERT_EQ(h[i], float_to_fp16(x[i]));
        ASSERT_EQ(f32_bits(rb[i]), f32_bits(round_bf16(x[i])));
        ASSERT_EQ(f32_bits(rh[i]), f32_bits(round_fp16(x[i])));
      } else {
        ASSERT_TRUE(std::isnan(bf16_to_float(b[i])) && std::isnan(fp16_to_float(h[i])));
        ASSERT_TRUE(std::isnan(rb[i]) && std::isnan(rh[i]));
      }
      ASSERT_EQ(f32_bits(bf[i]), f32_bits(bf16_to_float(b[i])));
      ASSERT_EQ(f32_bits(hf[i]), f32_bits(fp16_to_float(h[i])));
    }
  }
}

// Each vector path this CPU runs (AVX2 too on an AVX-512 machine: CPUs without AVX512_BF16 take it for
// every rounded operand under --precision bf16) against the scalar bits, at lengths around both widths.
TEST(Half, EveryBf16VectorPathMatchesScalar) {
  Rng rng(5);
  int ran = 0;
  for (HalfSimd path : {HalfSimd::Scalar, HalfSimd::Avx2, HalfSimd::Avx512}) {
    if (!half_simd_available(path)) continue;
    ++ran;
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 24u, 31u, 33u, 1027u}) {
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) {
        const uint32_t pick = rng.below(4);
        x[i] = pick == 0 ? f32_from_bits(rng.next_u32())                             // anything, NaN and inf included
               : pick == 1 ? f32_from_bits(0x3f808000u + (rng.below(2) << 16))  // exact ties, odd and even
                           : rng.uniform(-3.0f, 3.0f);
      }
      std::vector<uint16_t> b(n);
      std::vector<float> bf(n), rb(n);
      float_to_bf16(path, b.data(), x.data(), n);
      bf16_to_float(path, bf.data(), b.data(), n);
      round_bf16(path, rb.data(), x.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        SCOPED_TRACE(::testing::Message() << "path " << int(path) << " n " << n << " i " << i);
        ASSERT_EQ(b[i], float_to_bf16(x[i])) << "the same bits, NaN included (quiet, sign kept)";
        if (std::isnan(x[i]))
          ASSERT_TRUE(std::isnan(rb[i]));
        else
          ASSERT_EQ(f32_bits(rb[i]), f32_bits(round_bf16(x[i])));
        ASSERT_EQ(f32_bits(bf[i]), f32_bits(bf16_to_float(b[i])));
      }
    }
  }
  EXPECT_GE(ran, 1);
}

}  // namespace
}  // namespace ringtrain
