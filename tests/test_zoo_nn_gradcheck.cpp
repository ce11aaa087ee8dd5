// Finite-difference gradient checks in double precision of the zoo's normalisation, activation, elementwise and
// attention ops, through their ops::ref::*<double> instantiations (as test_gradcheck.cpp does for LeNet's ops):
// batch norm in training mode with the full dependence of the batch statistics on every sample, and in eval
// mode; layer norm; the attention core; GELU; ReLU6 away from its kinks; add and dropout.
//
// The method and its derived tolerance are gradcheck.h's. ReLU6's elements whose +-h perturbation crosses
// 0 or 6 are skipped (the kink pattern changes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "gradcheck.h"
#include "ringtrain/ops/attention.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/elementwise.h"
#include "ringtrain/ops/layer_norm.h"
#include "ringtrain/ops/pointwise.h"

using namespace ringtrain;
using namespace ringtrain::ops;
using namespace ringtrain::gradcheck;

namespace {

TEST(ZooNnGradcheck, BatchNormTraining) {
  for (BatchNormShape s : {BatchNormShape{3, 4, 5}, BatchNormShape{2, 3, 1}, BatchNormShape{1, 2, 6}}) {
    Rng rng(uint64_t(s.N * 100 + s.C * 10 + s.HW));
    const std::size_t n = std::size_t(s.N) * s.C * s.HW;
    std::vector<double> x = uniform(n, rng, -2, 2), g = uniform(s.C, rng, 0.5, 1.5), b = uniform(s.C, rng, -1, 1),
                        R = uniform(n, rng, -1, 1);
    std::vector<double> out(n), mean(s.C), invstd(s.C);
    auto f = [&] {
      ref::batch_norm_forward_train<double>(out.data(), mean.data(), invstd.data(), nullptr, nullptr, x.data(), g.data(),
                                            b.data(), s, 1e-5, 0.1);
      return project(out, R);
    };
    f();
    std::vector<double> dx(n), dg(s.C), db(s.C);
    ref::batch_norm_backward_train<double>(dx.data(), dg.data(), db.data(), R.data(), nullptr,
                                           x.data(), g.data(), mean.data(),
                                           invstd.data(), s);
    const std::string name = "batch_norm train N" + std::to_string(s.N) + " C" + std::to_string(s.C) + " HW" +
                             std::to_string(s.HW);
    check_gradient(name + " dx", x, dx, f);
    check_gradient(name + " dgamma", g, dg, f);
    check_gradient(name + " dbeta", b, db, f);
  }
}

TEST(ZooNnGradcheck, BatchNormEval) {
  const BatchNormShape s{3, 4, 5};
  Rng rng(2);
  const std::size_t n = std::size_t(s.N) * s.C * s.HW;
  std::vector<double> x = uniform(n, rng, -2, 2), g = uniform(s.C, rng, 0.5, 1.5), b = uniform(s.C, rng, -1, 1),
                      rm = uniform(s.C, rng, -0.5, 0.5), rv = uniform(s.C, rng, 0.5, 2), R = uniform(n, rng, -1, 1);
  std::vector<double> out(n);
  auto f = [&] {
    ref::batch_norm_forward_eval<double>(out.data(), x.data(), g.data(), b.data(), rm.data(), rv.data(), s, 1e-5);
    return project(out, R);
  };
  std::vector<double> dx(n), dg(s.C), db(s.C);
  ref::batch_norm_backward_eval<double>(dx.data(), dg.data(), db.data(), R.data(), nullptr,
                                        x.data(), g.data(), rm.data(),
                                        rv.data(), s, 1e-5);
  check_gradient("batch_norm eval dx", x, dx, f);
  check_gradient("batch_norm eval dgamma", g, dg, f);
  check_gradient("batch_norm eval dbeta", b, db, f);
}

TEST(ZooNnGradcheck, LayerNorm) {
  for (LayerNormShape s : {LayerNormShape{4, 7}, LayerNormShape{1, 16}, LayerNormShape{3, 2}}) {
    Rng rng(uint64_t(s.rows * 100 + s.dim));
    const std::size_t n = std::size_t(s.rows) * s.dim;
    std::vector<double> x = uniform(n, rng, -2, 2), w = uniform(s.dim, rng, 0.5, 1.5), b = uniform(s.dim, rng, -1, 1),
                        R = uniform(n, rng, -1, 1);
    std::vector<double> out(n), mean(s.rows), rstd(s.rows);
    auto f = [&] {
      ref::layer_norm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s, 1e-6);
      return project(out, R);
    };
    f();
    std::vector<double> dx(n), dw(s.dim), db(s.dim);
    ref::layer_norm_backward<double>(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                                     rstd.data(), s);
    const std::string name = "layer_norm rows" + std::to_string(s.rows) + " dim" + std::to_string(s.dim);
    check_gradient(name + " dx", x, dx, f);
    check_gradient(name + " dweight", w, dw, f);
    check_gradient(name + " dbias", b, db, f);
  }
}

TEST(ZooNnGradcheck, Attention) {
  for (AttentionShape s : {AttentionShape{2, 5, 8, 2}, AttentionShape{1, 1, 4, 1}, AttentionShape{1, 4, 6, 3},
                           AttentionShape{2, 3, 5, 1}}) {
    Rng rng(uint64_t(s.N * 1000 + s.T * 100 + s.D * 10 + s.H));
    const std::size_t nqkv = std::size_t(s.N) * s.T * 3 * s.D, nout = std::size_t(s.N) * s.T * s.D;
    std::vector<double> qkv = uniform(nqkv, rng, -1.5, 1.5), R = uniform(nout, rng, -1, 1);
    std::vector<double> out(nout), probs(std::size_t(s.N) * s.H * s.T * s.T);
    auto f = [&] {
      ref::attention_forward<double>(out.data(), probs.data(), qkv.data(), s);
      return project(out, R);
    };
    f();
    std::vector<double> dqkv(nqkv);
    ref::attention_backward<double>(dqkv.data(), R.data(), qkv.data(), probs.data(), s);
    check_gradient("attention N" + std::to_string(s.N) + " T" + std::to_string(s.T) + " D" + std::to_string(s.D) +
                       " H" + std::to_string(s.H) + " dqkv",
                   qkv, dqkv, f);
  }
}

TEST(ZooNnGradcheck, Gelu) {
  Rng rng(5);
  std::vector<double> x = uniform(200, rng, -6, 6), R = uniform(200, rng, -1, 1), out(200), dx(200);
  x[0] = 0.0, x[1] = -0.7517915;  // the origin and the derivative's zero
  auto f = [&] {
    ref::gelu_forward<double>(out.data(), x.data(), int64_t(x.size()));
    return project(out, R);
  };
  ref::gelu_backward<double>(dx.data(), R.data(), x.data(), nullptr, int64_t(x.size()));
  check_gradient("gelu dx", x, dx, f);
}

TEST(ZooNnGradcheck, Relu6AwayFromKinks) {
  Rng rng(6);
  std::vector<double> x = uniform(300, rng, -2, 8), R = uniform(300, rng, -1, 1), out(300), dx(300);
  x[0] = 0.0, x[1] = 6.0;  // on the kinks: skipped
  auto f = [&] {
    ref::relu6_forward<double>(out.data(), x.data(), int64_t(x.size()));
    Eval e = project(out, R);
    for (double v : x) e.pattern.push_back(uint8_t(v <= 0.0 ? 0 : v >= 6.0 ? 2 : 1));
    return e;
  };
  f();
  ref::relu6_backward<double>(dx.data(), R.data(), out.data(), int64_t(x.size()));
  check_gradient("relu6 dx", x, dx, f);
}

TEST(ZooNnGradcheck, AddAndDropout) {
  Rng rng(7);
  const int N = 3;
  const int64_t F = 20;
  std::vector<double> a = uniform(N * F, rng, -1, 1), b = uniform(N * F, rng, -1, 1), R = uniform(N * F, rng, -1, 1),
                      out(N * F);
  auto fa = [&] {
    ref::add_forward<double>(out.data(), a.data(), b.data(), N * F);
    return project(out, R);
  };
  check_gradient("add da", a, R, fa);
  check_gradient("add db", b, R, fa);
  DropoutShape s;
  s.N = N, s.F = F, s.p = 0.3, s.seed = 9, s.step = 4;
  auto fd = [&] {
    ref::dropout_forward<double>(out.data(), a.data(), s);
    return project(out, R);
  };
  std::vector<double> da(N * F);
  ref::dropout_forward<double>(da.data(), R.data(), s);  // the backward: the same mask and scale on dout
  check_gradient("dropout dx", a, da, fd);
}

}  // namespace
