// The zoo's normalisation, activation, elementwise and attention ops: every ISA level this CPU runs (the
// reference float table included) against the reference kernels in double precision on the same float
// inputs, on the zoo's shapes (batch 64: resnet18's batch norms, 64..512 channels at 14x14..1x1;
// mobilenet_v2's up to 1280 channels; ViT's T = 17 tokens, D = 128, 4 heads, MLP 512) and odd ones (batch 1
// and 3, sizes that are not a multiple of 8 or 16, T = 1, one head).
//
// Tolerances are derived per element from the kernels' float operations, with Higham's bound: a float sum of n
// terms in any order is within gamma(n) sum|terms| of the exact sum, gamma(n) = n u / (1 - n u), u = 2^-24.
// Each test states which sums its kernels do in float and what the error of each derived quantity adds; the
// magnitudes (sum|terms|) are computed in double from the reference values. Ops without arithmetic beyond one
// rounding (ReLU6, add, dropout) must equal the float reference exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "kernel_test_util.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;  // kU, gamma, random data, expect_within (kernel_test_util.h)

void expect_equal(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

// Every level this CPU can run, or only ref and RINGTRAIN_ISA's level when it is set (as test_kernels.cpp).
bool level_under_test(IsaLevel level) {
  const char* env = std::getenv("RINGTRAIN_ISA");
  return !(env && *env) || level == IsaLevel::Ref || level == parse_isa(env);
}

class ZooNnKernelTest : public ::testing::TestWithParam<IsaLevel> {
 protected:
  void SetUp() override {
    if (!level_under_test(GetParam()))
      GTEST_SKIP() << "RINGTRAIN_ISA=" << std::getenv("RINGTRAIN_ISA") << " selects another level";
  }
  const KernelTable& k() { return kernels_for(GetParam()); }
};

// ---- batch norm -----------------------------------------------------------------------------------
std::vector<BatchNormShape> bn_shapes() {
  std::vector<BatchNormShape> out = {
      {64, 64, 196}, {64, 128, 49}, {64, 256, 16}, {64, 512, 1},  // resnet18 at 14x14 .. 1x1
      {64, 1280, 4}, {64, 96, 9},                                 // mobilenet_v2's widest, an odd plane
      {1, 3, 35},    {3, 13, 9},    {3, 7, 1},    {2, 17, 10}, {1, 5, 1000},
      {2, 3, 2501}};  // a plane longer than the kernels' channel blocks (kBnRun)
  return out;
}
std::string bn_name(const BatchNormShape& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "N%d_C%d_HW%d", s.N, s.C, s.HW);
  return buf;
}

struct BnData {
  std::vector<float> x, gamma, beta, dout, rmean, rvar;
};
BnData bn_data(const BatchNormShape& s, Rng& rng) {
  const std::size_t n = std::size_t(s.N) * s.C * s.HW;
  BnData d;
  // An offset per channel: the statistics must not lose it (two-pass variance).
  d.x = random_vec(n, rng, -1.0f, 1.0f);
  for (int nn = 0; nn < s.N; ++nn)
    for (int c = 0; c < s.C; ++c)
      for (int i = 0; i < s.HW; ++i) d.x[(std::size_t(nn) * s.C + c) * s.HW + i] += float(c % 7) - 3.0f;
  d.gamma = random_vec(s.C, rng, 0.5f, 1.5f);
  d.beta = random_vec(s.C, rng, -0.5f, 0.5f);
  d.dout = random_vec(n, rng, -1.0f, 1.0f);
  d.rmean = random_vec(s.C, rng, -0.2f, 0.2f);
  d.rvar = random_vec(s.C, rng, 0.5f, 2.0f);
  return d;
}

// The fast kernels sum in double (each position over the N samples, then a channel's positions), so a sum's
// float error is each term's own rounding: one float operation (x - mean) before it is added. kBnFloatTerms
// is the length of the float sums the bounds below charge for: 1 term.
constexpr double kBnFloatTerms = 1.0;

// Training forward. With F = kBnFloatTerms, the mean is within dm = gamma(F + 1) mean|x| (with its rounding to
// float); the variance is sum (x - mean_f)^2 by positions, relatively within gamma(F + 2) (the mean's error
// enters only at second order), invstd within half that plus 2u. out = fma(x, a, b) with a = gamma invstd and
// b = beta - mean a rounded once each, so
//   |d out| <= gamma(F + 4) |a| (|x| + |mean| + mean|x|) + u |beta| (+ u |out|).
TEST_P(ZooNnKernelTest, BatchNormTrainForward) {
  Rng rng(11);
  for (const BatchNormShape& s : bn_shapes()) {
    if (s.count() < 2) continue;
    SCOPED_TRACE(bn_name(s));
    const BnData d = bn_data(s, rng);
    const std::size_t n = d.x.size();
    std::vector<float> out(n), mean(s.C), invstd(s.C), rm = d.rmean, rv = d.rvar;
    k().batch_norm_forward_train(out.data(), mean.data(), invstd.data(), rm.data(), rv.data(), d.x.data(),
                                 d.gamma.data(), d.beta.data(), s, 1e-5, 0.1);
    std::vector<double> xd = to_double(d.x), g = to_double(d.gamma), b = to_double(d.beta), want(n), wm(s.C), wi(s.C),
                        wrm = to_double(d.rmean), wrv = to_double(d.rvar);
    ref::batch_norm_forward_train<double>(want.data(), wm.data(), wi.data(), wrm.data(), wrv.data(), xd.data(), g.data(),
                                          b.data(), s, 1e-5, 0.1);
    std::vector<double> tol(n), tol_m(s.C), tol_i(s.C), tol_rm(s.C), tol_rv(s.C);
    const double F = kBnFloatTerms;
    for (int c = 0; c < s.C; ++c) {
      double abs_sum = 0.0;
      for (int nn = 0; nn < s.N; ++nn)
        for (int i = 0; i < s.HW; ++i) abs_sum += std::fabs(xd[(std::size_t(nn) * s.C + c) * s.HW + i]);
      const double mean_abs = abs_sum / double(s.count()), a = std::fabs(g[c] * wi[c]);
      tol_m[c] = gamma(F + 1) * mean_abs;
      tol_i[c] = gamma(F + 4) * wi[c];
      tol_rm[c] = 0.1 * tol_m[c];
      tol_rv[c] = gamma(F + 2) * (wrv[c] - 0.9 * d.rvar[c]);  // 0.1 * the unbiased variance
      for (int nn = 0; nn < s.N; ++nn)
        for (int i = 0; i < s.HW; ++i) {
          const std::size_t at = (std::size_t(nn) * s.C + c) * s.HW + i;
          tol[at] = gamma(F + 4) * a * (std::fabs(xd[at]) + std::fabs(wm[c]) + mean_abs) + kU * std::fabs(b[c]);
        }
    }
    expect_within("out", out, want, tol);
    expect_within("save_mean", mean, wm, tol_m);
    expect_within("save_invstd", invstd, wi, tol_i);
    expect_within("running_mean", rm, wrm, tol_rm);
    expect_within("running_var", rv, wrv, tol_rv);
  }
}

// Training backward, given the same saved statistics. Sums by positions (F = kBnFloatTerms float terms): sum dy
// within gamma(F) sum|dy|, sum dy (x - mean) within gamma(F + 1) sum|dy||x - mean|. dgamma = that times invstd;
// dx = k dy + (x e + f) (e, f rounded once; two FMAs) with k = gamma invstd, so
//   |d dx| <= gamma(F + 4) |k| (|dy| + 2 mean|dy| + 2 (|x| + |mean|) invstd^2 mean(|dy||x - mean|)).
TEST_P(ZooNnKernelTest, BatchNormTrainBackward) {
  Rng rng(12);
  for (const BatchNormShape& s : bn_shapes()) {
    if (s.count() < 2) continue;
    SCOPED_TRACE(bn_name(s));
    const BnData d = bn_data(s, rng);
    const std::size_t n = d.x.size();
    std::vector<double> xd = to_double(d.x), g = to_double(d.gamma), b = to_double(d.beta), dy = to_double(d.dout);
    std::vector<double> tmp(n), wm(s.C), wi(s.C);
    ref::batch_norm_forward_train<double>(tmp.data(), wm.data(), wi.data(), nullptr, nullptr, xd.data(), g.data(),
                                          b.data(), s, 1e-5, 0.1);
    std::vector<float> mean(wm.begin(), wm.end()), invstd(wi.begin(), wi.end());
    const std::vector<double> md = to_double(mean), id = to_double(invstd);
    std::vector<float> dx(n), dg(s.C), db(s.C);
    k().batch_norm_backward_train(dx.data(), dg.data(), db.data(), d.dout.data(), nullptr, d.x.data(), d.gamma.data(),
                                  mean.data(), invstd.data(), s);
    std::vector<double> wdx(n), wdg(s.C), wdb(s.C);
    ref::batch_norm_backward_train<double>(wdx.data(), wdg.data(), wdb.data(), dy.data(), nullptr,
                                           xd.data(), g.data(), md.data(),
                                           id.data(), s);
    std::vector<double> tol(n), tol_g(s.C), tol_b(s.C);
    const double F = kBnFloatTerms, cnt = double(s.count());
    for (int c = 0; c < s.C; ++c) {
      double sdy = 0.0, sdyx = 0.0;
      for (int nn = 0; nn < s.N; ++nn)
        for (int i = 0; i < s.HW; ++i) {
          const std::size_t at = (std::size_t(nn) * s.C + c) * s.HW + i;
          sdy += std::fabs(dy[at]);
          sdyx += std::fabs(dy[at]) * std::fabs(xd[at] - md[c]);
        }
      tol_b[c] = gamma(F) * sdy;
      tol_g[c] = gamma(F + 2) * sdyx * id[c];
      const double kk = std::fabs(g[c] * id[c]);
      for (int nn = 0; nn < s.N; ++nn)
        for (int i = 0; i < s.HW; ++i) {
          const std::size_t at = (std::size_t(nn) * s.C + c) * s.HW + i;
          tol[at] = gamma(F + 4) * kk *
                    (std::fabs(dy[at]) + 2 * sdy / cnt +
                     2 * (std::fabs(xd[at]) + std::fabs(md[c])) * id[c] * id[c] * sdyx / cnt);
        }
    }
    expect_within("dx", dx, wdx, tol);
    expect_within("dgamma", dg, wdg, tol_g);
    expect_within("dbeta", db, wdb, tol_b);
    // dx may be null (the first layer): the parameter gradients are the same.
    std::vector<float> dg2(s.C), db2(s.C);
    k().batch_norm_backward_train(nullptr, dg2.data(), db2.data(), d.dout.data(), nullptr, d.x.data(), d.gamma.data(),
                                  mean.data(), invstd.data(), s);
    expect_equal("dgamma without dx", dg2, dg);
    expect_equal("dbeta without dx", db2, db);
  }
}

// The training passes on runs of channels (nn::BatchNorm2d under --threads: one run a thread) touch only
// their channels and together give the whole pass's bits: outputs, statistics, running statistics, dx and
// the parameter gradients. Three uneven runs, one of them empty.
TEST_P(ZooNnKernelTest, BatchNormTrainOnChannelRunsEqualsWholePass) {
  Rng rng(13);
  for (const BatchNormShape& whole : bn_shapes()) {
    if (whole.count() < 2) continue;
    SCOPED_TRACE(bn_name(whole));
    const BnData d = bn_data(whole, rng);
    const std::size_t n = d.x.size(), C = std::size_t(whole.C);
    struct Result {
      std::vector<float> out, mean, invstd, rm, rv, dx, dg, db;
    };
    auto run = [&](const std::vector<std::pair<int, int>>& runs) {
      Result r{std::vector<float>(n, -7.0f), std::vector<float>(C, -7.0f), std::vector<float>(C, -7.0f), d.rmean, d.rvar,
               std::vector<float>(n, -7.0f), std::vector<float>(C, -7.0f), std::vector<float>(C, -7.0f)};
      for (auto [c0, c1] : runs) {
        BatchNormShape s = whole;
        s.c_begin = c0, s.c_end = c1;
        k().batch_norm_forward_train(r.out.data(), r.mean.data(), r.invstd.data(), r.rm.data(), r.rv.data(), d.x.data(),
                                     d.gamma.data(), d.beta.data(), s, 1e-5, 0.1);
      }
      for (auto [c0, c1] : runs) {
        BatchNormShape s = whole;
        s.c_begin = c0, s.c_end = c1;
        k().batch_norm_backward_train(r.dx.data(), r.dg.data(), r.db.data(), d.dout.data(), nullptr,
          d.x.data(), d.gamma.data(),
                                      r.mean.data(), r.invstd.data(), s);
      }
      return r;
    };
    const Result one = run({{0, -1}});
    const int a = whole.C / 3, b = whole.C / 3 + (whole.C + 1) / 2;
    const Result split = run({{b, whole.C}, {a, a}, {0, a}, {a, b}});
    expect_equal("out", split.out, one.out);
    expect_equal("mean", split.mean, one.mean);
    expect_equal("invstd", split.invstd, one.invstd);
    expect_equal("running mean", split.rm, one.rm);
    expect_equal("running var", split.rv, one.rv);
    expect_equal("dx", split.dx, one.dx);
    expect_equal("dgamma", split.dg, one.dg);
    expect_equal("dbeta", split.db, one.db);
  }
}

// Eval: out = fma(x, a, b), a and b rounded once from double: |d out| <= gamma(2) (|x a| + |b|). Backward:
// dx = (gamma invstd) dy, one rounding each; dgamma as in training with the running mean (gamma(F + 2)).
TEST_P(ZooNnKernelTest, BatchNormEvalForwardBackward) {
  Rng rng(13);
  for (const BatchNormShape& s : bn_shapes()) {
    SCOPED_TRACE(bn_name(s));
    const BnData d = bn_data(s, rng);
    const std::size_t n = d.x.size();
    std::vector<float> out(n), dx(n), dg(s.C), db(s.C);
    k().batch_norm_forward_eval(out.data(), d.x.data(), d.gamma.data(), d.beta.data(), d.rmean.data(), d.rvar.data(),
                                s, 1e-5);
    k().batch_norm_backward_eval(dx.data(), dg.data(), db.data(), d.dout.data(), nullptr, d.x.data(), d.gamma.data(),
                                 d.rmean.data(), d.rvar.data(), s, 1e-5);
    std::vector<double> xd = to_double(d.x), g = to_double(d.gamma), b = to_double(d.beta), dy = to_double(d.dout),
                        rm = to_double(d.rmean), rv = to_double(d.rvar);
    std::vector<double> want(n), wdx(n), wdg(s.C), wdb(s.C);
    ref::batch_norm_forward_eval<double>(want.data(), xd.data(), g.data(), b.data(), rm.data(), rv.data(), s, 1e-5);
    ref::batch_norm_backward_eval<double>(wdx.data(), wdg.data(), wdb.data(), dy.data(), nullptr,
                                          xd.data(), g.data(), rm.data(),
                                          rv.data(), s, 1e-5);
    std::vector<double> tol(n), tol_dx(n), tol_g(s.C), tol_b(s.C);
    for (int c = 0; c < s.C; ++c) {
      const double inv = 1.0 / std::sqrt(rv[c] + 1e-5), a = g[c] * inv, bb = b[c] - rm[c] * a;
      double sdy = 0.0, sdyx = 0.0;
      for (int nn = 0; nn < s.N; ++nn)
        for (int i = 0; i < s.HW; ++i) {
          const std::size_t at = (std::size_t(nn) * s.C + c) * s.HW + i;
          tol[at] = gamma(2) * (std::fabs(xd[at] * a) + std::fabs(bb));
          tol_dx[at] = gamma(2) * std::fabs(a * dy[at]);
          sdy += std::fabs(dy[at]);
          sdyx += std::fabs(dy[at]) * std::fabs(xd[at] - rm[c]);
        }
      tol_b[c] = gamma(kBnFloatTerms) * sdy;
      tol_g[c] = gamma(kBnFloatTerms + 2) * sdyx * inv;
    }
    expect_within("out", out, want, tol);
    expect_within("dx", dx, wdx, tol_dx);
    expect_within("dgamma", dg, wdg, tol_g);
    expect_within("dbeta", db, wdb, tol_b);
  }
}

// A ReLU / ReLU6 fused into batch norm (BatchNormShape::act) gives the bits of batch norm then the separate
// activation kernel, both ways, in training and in eval mode: forward act(bn(x)); backward batch norm's
// backward of the activation's backward of dout. Gamma is scaled by 4 so that many outputs pass 6.
TEST_P(ZooNnKernelTest, BatchNormFusedActivationEqualsSeparateLayers) {
  Rng rng(14);
  for (const BatchNormShape& plain : bn_shapes()) {
    if (plain.count() < 2) continue;
    BnData d = bn_data(plain, rng);
    for (float& g : d.gamma) g *= 4.0f;
    const std::size_t n = d.x.size();
    for (BnActivation act : {BnActivation::Relu, BnActivation::Relu6}) {
      SCOPED_TRACE(bn_name(plain) + (act == BnActivation::Relu ? " relu" : " relu6"));
      BatchNormShape fused = plain;
      fused.act = act;
      const auto activate = [&](std::vector<float>& y, const std::vector<float>& v) {
        act == BnActivation::Relu ? k().relu_forward(y.data(), v.data(), int64_t(n))
                                  : k().relu6_forward(y.data(), v.data(), int64_t(n));
      };
      const auto through = [&](std::vector<float>& dv, const std::vector<float>& y) {
        act == BnActivation::Relu ? k().relu_backward(dv.data(), d.dout.data(), y.data(), int64_t(n))
                                  : k().relu6_backward(dv.data(), d.dout.data(), y.data(), int64_t(n));
      };
      for (bool training : {true, false}) {
        SCOPED_TRACE(training ? "training" : "eval");
        std::vector<float> v(n), want_y(n), y(n), dv(n), mean(plain.C), invstd(plain.C), m2(plain.C), i2(plain.C);
        std::vector<float> rm = d.rmean, rv = d.rvar, rm2 = d.rmean, rv2 = d.rvar;
        if (training) {
          k().batch_norm_forward_train(v.data(), mean.data(), invstd.data(), rm.data(), rv.data(), d.x.data(),
                                       d.gamma.data(), d.beta.data(), plain, 1e-5, 0.1);
          k().batch_norm_forward_train(y.data(), m2.data(), i2.data(), rm2.data(), rv2.data(), d.x.data(),
                                       d.gamma.data(), d.beta.data(), fused, 1e-5, 0.1);
          expect_equal("save_mean", m2, mean);
          expect_equal("save_invstd", i2, invstd);
          expect_equal("running_var", rv2, rv);
        } else {
          k().batch_norm_forward_eval(v.data(), d.x.data(), d.gamma.data(), d.beta.data(), d.rmean.data(),
                                      d.rvar.data(), plain, 1e-5);
          k().batch_norm_forward_eval(y.data(), d.x.data(), d.gamma.data(), d.beta.data(), d.rmean.data(),
                                      d.rvar.data(), fused, 1e-5);
        }
        activate(want_y, v);
        expect_equal("out", y, want_y);
        through(dv, want_y);
        std::vector<float> want_dx(n), dx(n), want_dg(plain.C), dg(plain.C), want_db(plain.C), db(plain.C);
        if (training) {
          k().batch_norm_backward_train(want_dx.data(), want_dg.data(), want_db.data(), dv.data(), nullptr, d.x.data(),
                                        d.gamma.data(), mean.data(), invstd.data(), plain);
          k().batch_norm_backward_train(dx.data(), dg.data(), db.data(), d.dout.data(), y.data(), d.x.data(),
                                        d.gamma.data(), mean.data(), invstd.data(), fused);
        } else {
          k().batch_norm_backward_eval(want_dx.data(), want_dg.data(), want_db.data(), dv.data(), nullptr, d.x.data(),
                                       d.gamma.data(), d.rmean.data(), d.rvar.data(), plain, 1e-5);
          k().batch_norm_backward_eval(dx.data(), dg.data(), db.data(), d.dout.data(), y.data(), d.x.data(),
                                       d.gamma.data(), d.rmean.data(), d.rvar.data(), fused, 1e-5);
        }
        expect_equal("dx", dx, want_dx);
        expect_equal("dgamma", dg, want_dg);
        expect_equal("dbeta", db, want_db);
      }
    }
  }
}

// ---- pointwise --------------------------------------------------------------------------------------
std::vector<int64_t> pointwise_sizes() { return {int64_t(64) * 17 * 512, 1, 3, 37, 1001}; }

// ReLU6 is comparisons only: equal to the float reference, kinks (0 and 6 exactly) included.
TEST_P(ZooNnKernelTest, Relu6Exact) {
  Rng rng(21);
  for (int64_t n : pointwise_sizes()) {
    std::vector<float> x = random_vec(std::size_t(n), rng, -2.0f, 8.0f), dy = random_vec(std::size_t(n), rng, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i += 5) x[std::size_t(i)] = (i / 5) % 2 ? 6.0f : 0.0f;
    std::vector<float> out(x.size()), want(x.size()), dx(x.size()), wdx(x.size());
    k().relu6_forward(out.data(), x.data(), n);
    ref::relu6_forward<float>(want.data(), x.data(), n);
    expect_equal("relu6 out n=" + std::to_string(n), out, want);
    k().relu6_backward(dx.data(), dy.data(), out.data(), n);
    ref::relu6_backward<float>(wdx.data(), dy.data(), want.data(), n);
    expect_equal("relu6 dx n=" + std::to_string(n), dx, wdx);
  }
}

// GELU = x Phi(x). The fast kernels take Phi from erfc(|x| / sqrt 2) = t exp(-z^2 + p(t)) (relative error
// 1.2e-7 = 2u as an approximation), p a degree-9 polynomial in t <= 1 by Estrin's scheme (an absolute error
// in p is a relative one in the result): t = 1 / (1 + z/2) is within 0.5u (a division) or 0.57u (level
// avx512's reciprocal and Newton step), so t^8 from three squarings carries 7.6u, the term q4 t^8
// (|q4| <= 1) is within 9.6u, r1 t^4 (|r1| <= 3.1) within 7.3 x 3.1u, r0 (<= 2.74) within 3.1 x 2.74u,
// the last FMA 3u: 44u,
// then exp (2 ulp), -z^2 rounded (u z^2 absolute in exp's argument, i.e. relative in its result), and the
// products (3u): relative error of Phi(-|x|) <= u (52 + 2 z^2); for x > 0, Phi = 1 - that tail, whose
// error is then smaller than Phi's own (54 + 2 z^2 with the reciprocal). With 6u of margin: |d out| <=
// u (60 + 4 z^2) |out|, z = x / sqrt 2.
// Backward: d (Phi + x phi), Phi taken as out / x from the forward's output (out's error, u (54 + 2 z^2) by
// the above, plus the reciprocal's 0.57u and the product's 0.5u; 1/2 below |x| = 1e-30), phi = exp(-x^2 / 2) /
// sqrt(2 pi) relative within u (8 + x^2), the FMA and the product: within the same bound on (|Phi| + |x phi|) |d|.
TEST_P(ZooNnKernelTest, GeluForwardBackward) {
  Rng rng(22);
  for (int64_t n : pointwise_sizes()) {
    std::vector<float> x = random_vec(std::size_t(n), rng, -8.0f, 8.0f), dy = random_vec(std::size_t(n), rng, -1.0f, 1.0f);
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, -12.0f, 0.5f, -0.75f};
    for (std::size_t i = 0; i < x.size() && i < 9; ++i) x[i * (x.size() / 9 + 1) % x.size()] = special[i];
    std::vector<float> out(x.size()), dx(x.size());
    k().gelu_forward(out.data(), x.data(), n);
    k().gelu_backward(dx.data(), dy.data(), x.data(), out.data(), n);
    std::vector<double> xd = to_double(x), dyd = to_double(dy), want(x.size()), wdx(x.size()), tol(x.size()),
                        tol_dx(x.size());
    ref::gelu_forward<double>(want.data(), xd.data(), n);
    ref::gelu_backward<double>(wdx.data(), dyd.data(), xd.data(), nullptr, n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double z2 = xd[i] * xd[i] / 2, cdf = 0.5 * std::erfc(-xd[i] * M_SQRT1_2);
      const double xpdf = xd[i] * std::exp(-z2) / std::sqrt(2 * M_PI);
      tol[i] = kU * (60 + 4 * z2) * std::fabs(want[i]);
      tol_dx[i] = kU * (60 + 4 * z2) * (std::fabs(cdf) + std::fabs(xpdf)) * std::fabs(dyd[i]);
    }
    expect_within("gelu out n=" + std::to_string(n), out, want, tol);
    expect_within("gelu dx n=" + std::to_string(n), dx, wdx, tol_dx);
  }
}

// ---- the per-sample transpose (vit's patch tokens) ------------------------------------------------------
TEST_P(ZooNnKernelTest, TransposeSamplesExact) {
  Rng rng(29);
  // vit's [128][16] and back, shapes around the vector width (whole tiles, edges only, both), a row, a column
  for (auto [N, rows, cols] : std::vector<std::array<int, 3>>{
           {8, 128, 16}, {3, 16, 128}, {2, 17, 33}, {5, 31, 7}, {1, 1, 1}, {2, 1, 19}, {3, 19, 1}, {1, 16, 16}}) {
    const std::vector<float> src = random_vec(std::size_t(N) * rows * cols, rng, -1.0f, 1.0f);
    std::vector<float> out(src.size(), -7.0f), want(src.size(), 7.0f), back(src.size(), -7.0f);
    k().transpose_samples(out.data(), src.data(), N, rows, cols);
    ref::transpose_samples<float>(want.data(), src.data(), N, rows, cols);
    const std::string shape = std::to_string(N) + "x" + std::to_string(rows) + "x" + std::to_string(cols);
    expect_equal("transpose " + shape, out, want);
    k().transpose_samples(back.data(), out.data(), N, cols, rows);
    expect_equal("transpose back " + shape, back, src);
  }
}

// ---- add, dropout -----------------------------------------------------------------------------------
TEST_P(ZooNnKernelTest, AddAndDropoutExact) {
  Rng rng(31);
  for (int64_t n : pointwise_sizes()) {
    const std::vector<float> a = random_vec(std::size_t(n), rng, -1.0f, 1.0f), b = random_vec(std::size_t(n), rng, -1.0f, 1.0f);
    std::vector<float> out(a.size()), want(a.size());
    k().add_forward(out.data(), a.data(), b.data(), n);
    ref::add_forward<float>(want.data(), a.data(), b.data(), n);
    expect_equal("add n=" + std::to_string(n), out, want);
  }
  const std::vector<int64_t> ids = {5, 1000003, 7, 42, 9};
  for (auto [N, F] : {std::pair<int, int64_t>{64, 17 * 128}, {3, 37}, {1, 1}, {5, 1001}})
    for (double p : {0.0, 0.1, 0.5, 1.0}) {
      DropoutShape s;
      s.N = N, s.F = F, s.p = p, s.seed = 77, s.step = 3;
      s.sample_ids = N <= int(ids.size()) ? ids.data() : nullptr;
      s.first_sample = 16;
      s.salt = dropout_salt("encoder.dropout");
      const std::vector<float> x = random_vec(std::size_t(N) * F, rng, -1.0f, 1.0f);
      std::vector<float> out(x.size()), want(x.size());
      k().dropout_forward(out.data(), x.data(), s);
      ref::dropout_forward<float>(want.data(), x.data(), s);
      expect_equal("dropout N=" + std::to_string(N) + " p=" + std::to_string(p), out, want);
    }
}

// ---- layer norm -------------------------------------------------------------------------------------
std::vector<LayerNormShape> ln_shapes() { return {{64 * 17, 128}, {64 * 17, 512}, {1, 5}, {3 * 17, 37}, {3, 100}, {1, 7}}; }

// Forward: the row's mean in float (gamma(dim + 1) mean|x|), the variance relatively within gamma(dim + 2),
// rstd within half that + 2u; out = fma((x - mean) rstd, w, b), three roundings:
//   |d out| <= gamma(dim + 4) |w| rstd (mean|x| + |x - mean|) (+ u |out|).
// Backward from the same saved statistics: xhat (2 roundings), g = dy w, sums of g and g xhat in float
// (gamma(dim + 3)), dx = rstd ((g - mean g) - xhat mean(g xhat)):
//   |d dx| <= gamma(dim + 6) rstd (|g| + mean|g| + |xhat| mean|g xhat|);
// dweight and dbias accumulate over the rows in float: gamma(rows + 3) sum|dy xhat|, gamma(rows) sum|dy|.
TEST_P(ZooNnKernelTest, LayerNormForwardBackward) {
  Rng rng(41);
  for (const LayerNormShape& s : ln_shapes()) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " dim " + std::to_string(s.dim));
    const std::size_t n = std::size_t(s.rows) * s.dim;
    std::vector<float> x = random_vec(n, rng, -2.0f, 2.0f), w = random_vec(s.dim, rng, 0.5f, 1.5f),
                       b = random_vec(s.dim, rng, -0.5f, 0.5f), dy = random_vec(n, rng, -1.0f, 1.0f);
    for (std::size_t i = 0; i < n; ++i) x[i] += float((i / s.dim) % 5);  // row offsets
    std::vector<float> out(n), mean(s.rows), rstd(s.rows);
    k().layer_norm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s, 1e-6);
    std::vector<double> xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy), want(n),
                        wm(s.rows), wr(s.rows);
    ref::layer_norm_forward<double>(want.data(), wm.data(), wr.data(), xd.data(), wd.data(), bd.data(), s, 1e-6);
    std::vector<double> tol(n), tol_m(s.rows), tol_r(s.rows);
    const double dim = s.dim;
    for (int64_t r = 0; r < s.rows; ++r) {
      double mean_abs = 0.0;
      for (int i = 0; i < s.dim; ++i) mean_abs += std::fabs(xd[r * s.dim + i]) / dim;
      tol_m[r] = gamma(dim + 1) * mean_abs;
      tol_r[r] = gamma(dim + 4) * wr[r];
      for (int i = 0; i < s.dim; ++i)
        tol[r * s.dim + i] = gamma(dim + 4) * std::fabs(wd[i]) * wr[r] * (mean_abs + std::fabs(xd[r * s.dim + i] - wm[r]));
    }
    expect_within("out", out, want, tol);
    expect_within("save_mean", mean, wm, tol_m);
    expect_within("save_rstd", rstd, wr, tol_r);

    // Backward from the reference statistics rounded to float.
    std::vector<float> fm(wm.begin(), wm.end()), fr(wr.begin(), wr.end());
    const std::vector<double> md = to_double(fm), rd = to_double(fr);
    std::vector<float> dx(n), dw(s.dim), db(s.dim);
    k().layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), fm.data(), fr.data(), s);
    std::vector<double> wdx(n), wdw(s.dim), wdb(s.dim);
    ref::layer_norm_backward<double>(wdx.data(), wdw.data(), wdb.data(), dyd.data(), xd.data(), wd.data(), md.data(),
                                     rd.data(), s);
    std::vector<double> tol_dx(n), tol_w(s.dim, 0.0), tol_b(s.dim, 0.0);
    for (int64_t r = 0; r < s.rows; ++r) {
      double mg = 0.0, mgx = 0.0;
      for (int i = 0; i < s.dim; ++i) {
        const double xhat = (xd[r * s.dim + i] - md[r]) * rd[r], g = dyd[r * s.dim + i] * wd[i];
        mg += std::fabs(g) / dim;
        mgx += std::fabs(g * xhat) / dim;
        tol_w[i] += std::fabs(dyd[r * s.dim + i] * xhat);
        tol_b[i] += std::fabs(dyd[r * s.dim + i]);
      }
      for (int i = 0; i < s.dim; ++i) {
        const double xhat = (xd[r * s.dim + i] - md[r]) * rd[r], g = dyd[r * s.dim + i] * wd[i];
        tol_dx[r * s.dim + i] = gamma(dim + 6) * rd[r] * (std::fabs(g) + mg + std::fabs(xhat) * mgx);
      }
    }
    for (int i = 0; i < s.dim; ++i) {
      tol_w[i] *= gamma(double(s.rows) + 3);
      tol_b[i] *= gamma(double(s.rows));
    }
    expect_within("dx", dx, wdx, tol_dx);
    expect_within("dweight", dw, wdw, tol_w);
    expect_within("dbias", db, wdb, tol_b);

    // accumulate_dx (a residual stream's second gradient): dx's values plus the same gradient, exactly the
    // float add of the two; the parameter gradients as without it.
    std::vector<float> acc = random_vec(n, rng, -1.0f, 1.0f), want_acc(n), dw2(s.dim), db2(s.dim);
    for (std::size_t i = 0; i < n; ++i) want_acc[i] = acc[i] + dx[i];
    LayerNormShape sa = s;
    sa.accumulate_dx = true;
    k().layer_norm_backward(acc.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), fm.data(), fr.data(), sa);
    expect_equal("dx accumulated", acc, want_acc);
    expect_equal("dweight, accumulating", dw2, dw);
    expect_equal("dbias, accumulating", db2, db);
  }
}

// ---- attention --------------------------------------------------------------------------------------
std::vector<AttentionShape> attention_shapes() {
  // (The fast kernels put L (sample, head) pairs in the vector lanes: 20 and 21 pairs leave a short last group.)
  return {{64, 17, 128, 4}, {1, 1, 8, 1}, {3, 5, 12, 3}, {3, 17, 24, 1}, {2, 3, 20, 4}, {1, 17, 128, 4},
          {5, 17, 40, 4},  {7, 2, 24, 3}};
}
std::string attention_name(const AttentionShape& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "N%d_T%d_D%d_H%d", s.N, s.T, s.D, s.H);
  return buf;
}

// Forward, per sample, head and query row i. S_ij = q_i . k_j in float (gamma(hd) sum|q||k|); softmax's
// argument S_ij scale - max_i scale (three more roundings, each below u scale sum|q_i||k_j|) is then within
// eps_i = scale gamma(hd + 3) max_j sum|q_i||k_j| (+ 2u of margin), which is e_ij's relative error, plus
// exp's 2 ulp; the sum of the e_ij adds gamma(T), the normalisation 2 roundings: each P_ij is relatively
// within 2 eps_i + gamma(T) + 8u. out_i = sum_j P_ij v_j in float:
//   |d P_ij| <= (2 eps_i + gamma(T) + 8u) P_ij,   |d out_id| <= (2 gamma(T) + 2 eps_i + 8u) sum_j P_ij |v_jd|.
// Backward from the same probabilities: dP_ij = dO_i . v_j within A_ij = gamma(hd) sum|dO_i||v_j|; the row sum
// r_i = sum_j P_ij dP_ij within R_i = gamma(T + 1) sum_j P_ij |dP_ij| + sum_j P_ij A_ij; dS_ij =
// P_ij (dP_ij - r_i) scale within E_ij = P_ij scale (A_ij + R_i + 3u |dP_ij - r_i|). Then
//   dv_jd = sum_i P_ij dO_id:   gamma(T) sum_i P_ij |dO_id|
//   dq_id = sum_j dS_ij k_jd:   gamma(T) sum_j |dS_ij||k_jd| + sum_j E_ij |k_jd|   (dk alike, with q).
struct AttentionTolerance {
  std::vector<double> out, probs, dqkv;
};
AttentionTolerance attention_tolerance(const AttentionShape& s, const std::vector<double>& qkv,
                                       const std::vector<double>& probs, const std::vector<double>& dout) {
  const int hd = s.hd(), T = s.T, ld = 3 * s.D;
  const double scale = 1.0 / std::sqrt(double(hd));
  AttentionTolerance t;
  t.out.assign(std::size_t(s.N) * T * s.D, 0.0);
  t.probs.assign(probs.size(), 0.0);
  t.dqkv.assign(qkv.size(), 0.0);
  std::vector<double> A(std::size_t(T) * T), dP(A.size()), dS(A.size()), E(A.size());
  for (int n = 0; n < s.N; ++n)
    for (int h = 0; h < s.H; ++h) {
      const double* q = qkv.data() + std::size_t(n) * T * ld + h * hd;
      const double *k = q + s.D, *v = q + 2 * s.D;
      const double* P = probs.data() + (std::size_t(n) * s.H + h) * T * T;
      const double* dO = dout.data() + std::size_t(n) * T * s.D + h * hd;
      const std::size_t base = std::size_t(n) * T * ld + h * hd;
      for (int i = 0; i < T; ++i) {
        double qk_max = 0.0;
        for (int j = 0; j < T; ++j) {
          double m = 0.0;
          for (int d = 0; d < hd; ++d) m += std::fabs(q[i * ld + d] * k[j * ld + d]);
          qk_max = std::max(qk_max, m);
        }
        const double eps_i = scale * gamma(hd + 3) * qk_max + 2 * kU;
        for (int j = 0; j < T; ++j) t.probs[(std::size_t(n) * s.H + h) * T * T + i * T + j] = (2 * eps_i + gamma(T) + 8 * kU) * P[i * T + j];
        for (int d = 0; d < hd; ++d) {
          double m = 0.0;
          for (int j = 0; j < T; ++j) m += P[i * T + j] * std::fabs(v[j * ld + d]);
          t.out[(std::size_t(n) * T + i) * s.D + h * hd + d] = (2 * gamma(T) + 2 * eps_i + 8 * kU) * m;
        }
        double r = 0.0, R = 0.0;
        for (int j = 0; j < T; ++j) {
          double dp = 0.0, a = 0.0;
          for (int d = 0; d < hd; ++d) {
            dp += dO[i * s.D + d] * v[j * ld + d];
            a += std::fabs(dO[i * s.D + d] * v[j * ld + d]);
          }
          dP[i * T + j] = dp;
          A[i * T + j] = gamma(hd) * a;
          r += P[i * T + j] * dp;
        }
        for (int j = 0; j < T; ++j) R += P[i * T + j] * (gamma(T + 1) * std::fabs(dP[i * T + j]) + A[i * T + j]);
        for (int j = 0; j < T; ++j) {
          dS[i * T + j] = P[i * T + j] * (dP[i * T + j] - r) * scale;
          E[i * T + j] = P[i * T + j] * scale * (A[i * T + j] + R + 3 * kU * std::fabs(dP[i * T + j] - r));
        }
      }
      for (int i = 0; i < T; ++i)
        for (int d = 0; d < hd; ++d) {
          double tq = 0.0, tk = 0.0, tv = 0.0;
          for (int j = 0; j < T; ++j) {
            tq += gamma(T) * std::fabs(dS[i * T + j] * k[j * ld + d]) + E[i * T + j] * std::fabs(k[j * ld + d]);
            tk += gamma(T) * std::fabs(dS[j * T + i] * q[j * ld + d]) + E[j * T + i] * std::fabs(q[j * ld + d]);
            tv += gamma(T) * P[j * T + i] * std::fabs(dO[j * s.D + d]);
          }
          t.dqkv[base + i * ld + d] = tq;
          t.dqkv[base + i * ld + s.D + d] = tk;
          t.dqkv[base + i * ld + 2 * s.D + d] = tv;
        }
    }
  return t;
}

TEST_P(ZooNnKernelTest, AttentionForwardBackward) {
  Rng rng(51);
  for (const AttentionShape& s : attention_shapes()) {
    SCOPED_TRACE(attention_name(s));
    const std::size_t nqkv = std::size_t(s.N) * s.T * 3 * s.D, nout = std::size_t(s.N) * s.T * s.D,
                      nprobs = std::size_t(s.N) * s.H * s.T * s.T;
    // q and k scaled so the scores spread over a few units: a softmax that is neither flat nor one-hot.
    const std::vector<float> qkv = random_vec(nqkv, rng, -1.5f, 1.5f), dout = random_vec(nout, rng, -1.0f, 1.0f);
    std::vector<float> out(nout), probs(nprobs), dqkv(nqkv);
    k().attention_forward(out.data(), probs.data(), qkv.data(), s);
    std::vector<double> qd = to_double(qkv), dod = to_double(dout), want(nout), wp(nprobs), wdq(nqkv);
    ref::attention_forward<double>(want.data(), wp.data(), qd.data(), s);
    const AttentionTolerance tol = attention_tolerance(s, qd, wp, dod);
    expect_within("out", out, want, tol.out);
    expect_within("probs", probs, wp, tol.probs);
    // Backward from the reference probabilities rounded to float (the kernels' saved state).
    std::vector<float> fp(wp.begin(), wp.end());
    const std::vector<double> pd = to_double(fp);
    k().attention_backward(dqkv.data(), dout.data(), qkv.data(), fp.data(), s);
    ref::attention_backward<double>(wdq.data(), dod.data(), qd.data(), pd.data(), s);
    const AttentionTolerance tol_b = attention_tolerance(s, qd, pd, dod);
    expect_within("dqkv", dqkv, wdq, tol_b.dqkv);
  }
}

// The 16-bit tables round the attention core's operands (qkv; dout and qkv backward) and run this level's
// fp32 kernel: bit for bit that composition.
TEST_P(ZooNnKernelTest, AttentionSixteenBitRoundsOperands) {
  Rng rng(52);
  const AttentionShape s{3, 17, 24, 2};
  const std::size_t nqkv = std::size_t(s.N) * s.T * 3 * s.D, nout = std::size_t(s.N) * s.T * s.D,
                    nprobs = std::size_t(s.N) * s.H * s.T * s.T;
  const std::vector<float> qkv = random_vec(nqkv, rng, -1.5f, 1.5f), dout = random_vec(nout, rng, -1.0f, 1.0f);
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<float> rq(nqkv), rd(nout);
    if (p == Precision::Bf16) {
      round_bf16(rq.data(), qkv.data(), nqkv);
      round_bf16(rd.data(), dout.data(), nout);
    } else {
      round_fp16(rq.data(), qkv.data(), nqkv);
      round_fp16(rd.data(), dout.data(), nout);
    }
    const KernelTable& t16 = rounding_kernels_for(GetParam(), p);
    std::vector<float> out(nout), probs(nprobs), dq(nqkv), want(nout), wp(nprobs), wdq(nqkv);
    t16.attention_forward(out.data(), probs.data(), qkv.data(), s);
    k().attention_forward(want.data(), wp.data(), rq.data(), s);
    expect_equal("out", out, want);
    expect_equal("probs", probs, wp);
    t16.attention_backward(dq.data(), dout.data(), qkv.data(), probs.data(), s);
    k().attention_backward(wdq.data(), rd.data(), rq.data(), wp.data(), s);
    expect_equal("dqkv", dq, wdq);
    // The other ops of the family are the fp32 table's.
    EXPECT_EQ(t16.layer_norm_forward, k().layer_norm_forward);
    EXPECT_EQ(t16.batch_norm_forward_train, k().batch_norm_forward_train);
    EXPECT_EQ(t16.gelu_forward, k().gelu_forward);
  }
}

TEST(ZooNnKernelDispatch, TablesAreCompleteAndDistinct) {
  for (IsaLevel level : supported_isas()) {
    const KernelTable& t = kernels_for(level);
    EXPECT_TRUE(t.batch_norm_forward_train && t.batch_norm_forward_eval && t.batch_norm_backward_train &&
                t.batch_norm_backward_eval && t.relu6_forward && t.relu6_backward && t.gelu_forward &&
                t.gelu_backward && t.add_forward && t.dropout_forward && t.layer_norm_forward &&
                t.layer_norm_backward && t.attention_forward && t.attention_backward && t.transpose_samples)
        << isa_name(level);
    if (level != IsaLevel::Ref) {
      EXPECT_NE(t.attention_forward, reference_kernels().attention_forward) << isa_name(level);
      EXPECT_NE(t.batch_norm_forward_train, reference_kernels().batch_norm_forward_train) << isa_name(level);
    }
  }
}

std::string isa_param_name(const ::testing::TestParamInfo<IsaLevel>& info) { return isa_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Isa, ZooNnKernelTest, ::testing::ValuesIn(supported_isas()), isa_param_name);

}  // namespace
}  // namespace ringtrain::ops
