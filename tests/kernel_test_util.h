// Helpers shared by the kernel tests that check a table against the double-precision reference within a
// derived rounding bound (test_kernels.cpp, test_zoo_conv_kernels.cpp, test_zoo_nn_kernels.cpp,
// test_kernels_bf16.cpp, test_kernels_bf16_zoo.cpp; the 16-bit bounds are derived in test_kernels_bf16.cpp's
// header): fp32's unit roundoff and gamma(n), random and integer data, operands
// rounded to 16 bits, float data as double (and its magnitudes), the element-wise bound check, and the
// fixture base that skips the ISA levels RINGTRAIN_ISA does not select.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops::kernel_test {

constexpr double kU = 1.0 / 16777216.0;  // fp32's unit roundoff, 2^-24
// Higham's gamma(n) = n u / (1 - n u): an fp32 sum of n terms, in any order, is within gamma(n) sum |terms|.
inline double gamma(double n) { return n * kU / (1.0 - n * kU); }

inline std::vector<float> random_vec(std::size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}
// Integers in [-range, range] times scale (a power of two): exact in bf16 and fp16.
inline std::vector<float> integer_vec(std::size_t n, Rng& rng, int range, float scale) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(int(rng.below(2 * range + 1)) - range) * scale;
  return v;
}
// v rounded to nearest in bf16 or fp16 (and back to float): what a 16-bit table computes with.
inline std::vector<float> rounded(const std::vector<float>& v, Precision p = Precision::Bf16) {
  std::vector<float> r(v.size());
  if (p == Precision::Bf16)
    round_bf16(r.data(), v.data(), v.size());
  else
    round_fp16(r.data(), v.data(), v.size());
  return r;
}
inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<double> abs_double(const std::vector<float>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]);
  return out;
}

// |got - want| <= tol(i) + u |want| (the final rounding) + floor, element by element; prints the first
// mismatches and records the worst error over its tolerance as a test property.
template <class Tol>
void expect_elementwise(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                        Tol tol_of, double floor) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = tol_of(i) + kU * std::fabs(want[i]) + floor;
    const double err = std::fabs(double(got[i]) - want[i]);
    worst = std::max(worst, err / tol);
    if (!(err <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (error " << err
                    << " > tolerance " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " outside tolerance";
  ::testing::Test::RecordProperty(what + "_worst_error_over_tolerance", std::to_string(worst));
}
// An fp32 result of reductions of length n: |got - want| <= gamma(n) mag[i] (+ u |want|).
inline void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                         const std::vector<double>& mag, double n) {
  ASSERT_EQ(mag.size(), want.size());
  expect_elementwise(what, got, want, [&](std::size_t i) { return gamma(n) * mag[i]; }, 1e-30);
}
// |got - want| <= tol[i] (+ u |want|, + a denormal floor).
inline void expect_within(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                          const std::vector<double>& tol) {
  ASSERT_EQ(tol.size(), want.size());
  expect_elementwise(what, got, want, [&](std::size_t i) { return tol[i]; }, 1e-37);
}
// |got - want| <= rel * mag + g * magr + u |want| element by element (g: gamma of the reduction length).
inline void expect_within(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                          const std::vector<double>& mag, double rel, const std::vector<double>& magr, double g) {
  ASSERT_EQ(mag.size(), want.size());
  ASSERT_EQ(magr.size(), want.size());
  expect_elementwise(what, got, want, [&](std::size_t i) { return rel * mag[i] + g * magr[i]; }, 1e-30);
}

// Whether this run tests `level`: every level unless RINGTRAIN_ISA selects one (ref always runs).
inline bool level_under_test(IsaLevel level) {
  const char* env = std::getenv("RINGTRAIN_ISA");
  return !(env && *env) || level == IsaLevel::Ref || level == parse_isa(env);
}

// A test parameterised by an ISA level, alone or first in a tuple, skipped where level_under_test says no.
inline IsaLevel level_of(IsaLevel level) { return level; }
template <class... Rest>
IsaLevel level_of(const std::tuple<IsaLevel, Rest...>& param) {
  return std::get<0>(param);
}
template <class Param>
class LevelTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!level_under_test(level_of(this->GetParam()))) GTEST_SKIP() << "RINGTRAIN_ISA selects another level";
  }
};

}  // namespace ringtrain::ops::kernel_test
