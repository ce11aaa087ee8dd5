// Finite-difference gradient checks in double precision, shared by test_gradcheck.cpp (LeNet-5's ops),
// test_zoo_gradcheck.cpp (conv and pooling of the zoo) and test_zoo_nn_gradcheck.cpp (norms, activations,
// attention).
//
// The checked quantity is a scalar L: sum(out * R) for a fixed random R (so dout = R), or a mean loss.
// Tolerance, derived rather than set by eye: a central difference of L carries a rounding error of about
// eps * S / h, where S = sum |terms of L| (eps = 2^-52), and a truncation error of h^2 |L'''| / 6 (about 1e-12
// here). Each element must satisfy |analytic - numeric| <= 1e-6 * max(|analytic|, |numeric|) + 8 * eps * S / h:
// relative error under 1e-6 wherever the gradient is well above the rounding floor, absolute otherwise.
// Kinks are skipped, not smoothed over: an element is skipped when perturbing it by +-h changes the
// evaluation's `pattern` (ReLU signs, ReLU6 regions, max-pool winners), as ggml's test-backend-ops does.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"

namespace ringtrain::gradcheck {

constexpr double kH = 1e-6;
constexpr double kRel = 1e-6;
constexpr double kEps = 0x1p-52;

struct Eval {
  double value = 0.0;            // L
  double magnitude = 0.0;        // S: sum of |terms| of L, for the rounding floor
  std::vector<uint8_t> pattern;  // kink state: a change means a kink was crossed
};

inline std::vector<double> uniform(std::size_t n, Rng& rng, double lo = -1.0, double hi = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * double(rng.next_u64() >> 11) * 0x1p-53;
  return v;
}

// L = sum(out * R) and its magnitude.
inline Eval project(const std::vector<double>& out, const std::vector<double>& R) {
  Eval e;
  for (std::size_t i = 0; i < out.size(); ++i) {
    e.value += out[i] * R[i];
    e.magnitude += std::fabs(out[i] * R[i]);
  }
  return e;
}

struct Report {
  int checked = 0, skipped = 0;
  double max_rel = 0.0;  // max |a - n| / max(|a|, |n|) over elements above the rounding floor
};

// Checks analytic[i] = dL/dx[i] for every i in `indices` (all if empty) by central differences of f
// (which reads x); prints one summary line, fails the test for elements out of tolerance (the first 5 named).
inline Report check_gradient(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic,
                             const std::function<Eval()>& f, std::vector<std::size_t> indices = {}) {
  EXPECT_EQ(x.size(), analytic.size()) << what;
  if (indices.empty())
    for (std::size_t i = 0; i < x.size(); ++i) indices.push_back(i);
  const Eval base = f();
  Report r;
  int printed = 0;
  for (std::size_t i : indices) {
    const double saved = x[i];
    x[i] = saved + kH;
    const Eval plus = f();
    x[i] = saved - kH;
    const Eval minus = f();
    x[i] = saved;
    if (plus.pattern != base.pattern || minus.pattern != base.pattern) {
      ++r.skipped;
      continue;
    }
    ++r.checked;
    const double numeric = (plus.value - minus.value) / (2 * kH);
    const double a = analytic[i];
    const double floor = 8 * kEps * std::max({base.magnitude, plus.magnitude, minus.magnitude}) / kH;
    const double diff = std::fabs(a - numeric);
    const double scale = std::max(std::fabs(a), std::fabs(numeric));
    if (scale > floor / kRel) r.max_rel = std::max(r.max_rel, diff / scale);
    if (!(diff <= kRel * scale + floor) && printed++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << ", numeric " << numeric << " (difference "
                    << diff << ", allowed " << kRel * scale + floor << ")";
  }
  std::printf("  %-56s %5d checked, %4d skipped at kinks, max relative error %.2e\n", what.c_str(), r.checked,
              r.skipped, r.max_rel);
  EXPECT_GT(r.checked, 0) << what;
  return r;
}

}  // namespace ringtrain::gradcheck
