// The AVX2 vector wrapper's masked stores (src/ringtrain/ops/cpu/simd_avx2.h): prefix masks go out as plain
// 4-, 2- and 1-float stores (vmaskmovps is microcoded on AMD Zen 2/3), any other mask through vmaskmovps.
// Either way exactly the masked lanes are written and nothing around them. This file is built with the AVX2
// flags (tests/CMakeLists.txt); on a CPU without AVX2 every test skips.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ringtrain/ops/cpu/simd_avx2.h"

namespace {

using V = ringtrain::ops::cpu::VecAvx2;

bool cpu_has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

constexpr float kUntouched = -7.25f;

// Stores lanes 0..7 = 1..8 at offset 3 of a 16-float buffer through `store`, then checks every float: lane l
// written iff want(l), the rest (and the floats around the vector) still kUntouched.
template <class Store, class Want>
void expect_lanes(Store store, Want want, const char* what) {
  float buf[16];
  for (float& f : buf) f = kUntouched;
  store(buf + 3, V::R(_mm256_setr_ps(1, 2, 3, 4, 5, 6, 7, 8)));
  for (int i = 0; i < 16; ++i) {
    const int l = i - 3;
    const bool written = l >= 0 && l < V::L && want(l);
    EXPECT_EQ(buf[i], written ? float(l + 1) : kUntouched) << what << ", float " << i;
  }
}

TEST(SimdAvx2, StoreMaskOfAPrefixWritesExactlyItsLanes) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  for (int n = 0; n <= V::L; ++n) {
    const std::string what = "mask(" + std::to_string(n) + ")";
    expect_lanes([n](float* p, V::R v) { V::store_mask(p, v, V::mask(n)); }, [n](int l) { return l < n; },
                 what.c_str());
    expect_lanes([n](float* p, V::R v) { V::store_first(p, v, n); }, [n](int l) { return l < n; },
                 ("store_first " + what).c_str());
  }
}

TEST(SimdAvx2, StoreMaskOfAnyOtherShapeWritesExactlyItsLanes) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  for (unsigned bits : {0x02u, 0x05u, 0x80u, 0xfeu, 0x7eu, 0xaau, 0x0eu}) {  // none a prefix
    alignas(32) float on[V::L];
    for (int l = 0; l < V::L; ++l) on[l] = (bits >> l) & 1u ? 1.0f : 0.0f;
    const V::M m = V::mask_where(on);
    const std::string what = "lanes " + std::to_string(bits);
    expect_lanes([m](float* p, V::R v) { V::store_mask(p, v, m); }, [bits](int l) { return ((bits >> l) & 1u) != 0; },
                 what.c_str());
  }
}

}  // namespace
