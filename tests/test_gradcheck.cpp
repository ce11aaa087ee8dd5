// Finite-difference gradient checks in double precision (DESIGN.md): every reference op's backward, through
// its ops::ref::*<double> instantiation, and the whole LeNet-5 composed by hand from the same double ops in the
// model's layer order (nn::Model is float), against central differences with h = 1e-6.
//
// The method and its derived tolerance are in gradcheck.h; the kink pattern here is every ReLU's sign and every
// max-pool window's winner.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "ringtrain/core/rng.h"
#include "gradcheck.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/linear.h"
#include "ringtrain/ops/loss.h"
#include "ringtrain/ops/pool.h"

using namespace ringtrain;
using namespace ringtrain::ops;
using namespace ringtrain::gradcheck;

namespace {

void check_conv(Conv2dShape s, uint64_t seed, bool with_bias) {
  Rng rng(seed);
  const std::string name = "conv2d N" + std::to_string(s.N) + " C" + std::to_string(s.C) + " " +
                           std::to_string(s.H) + "x" + std::to_string(s.W) + " K" + std::to_string(s.K) + " " +
                           std::to_string(s.R) + "x" + std::to_string(s.S) + " stride " + std::to_string(s.stride) +
                           " pad " + std::to_string(s.pad) + (with_bias ? "" : " no bias");
  SCOPED_TRACE(name);
  const std::size_t out_n = std::size_t(s.N) * s.K * s.P() * s.Q();
  std::vector<double> inp = uniform(std::size_t(s.N) * s.C * s.H * s.W, rng, -1, 1);
  std::vector<double> weight = uniform(std::size_t(s.K) * s.C * s.R * s.S, rng, -1, 1);
  std::vector<double> bias = uniform(std::size_t(s.K), rng, -1, 1);
  std::vector<double> R = uniform(out_n, rng, -1, 1);
  std::vector<double> out(out_n);
  auto f = [&] {
    ref::conv2d_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr, s);
    return project(out, R);
  };
  std::vector<double> dinp(inp.size(), 7.0), dweight(weight.size(), 7.0), dbias(bias.size(), 7.0);  // overwritten
  ref::conv2d_backward_data(dinp.data(), R.data(), weight.data(), s);
  ref::conv2d_backward_weight(dweight.data(), with_bias ? dbias.data() : nullptr, R.data(), inp.data(), s);
  check_gradient(name + " dinp", inp, dinp, f);
  check_gradient(name + " dweight", weight, dweight, f);
  if (with_bias) check_gradient(name + " dbias", bias, dbias, f);
}

}  // namespace

TEST(GradientCheck, Conv2dStridePaddingVariants) {
  check_conv({2, 3, 7, 6, 4, 3, 2, 1, 0}, 1, true);   // N C H W K R S stride pad
  check_conv({2, 2, 8, 9, 3, 3, 3, 2, 1}, 2, true);   // stride 2, padding 1
  check_conv({1, 3, 9, 7, 2, 5, 5, 2, 2}, 3, true);   // stride 2, padding 2, odd sizes
  check_conv({3, 1, 11, 10, 2, 3, 4, 3, 1}, 4, true); // stride 3
  check_conv({2, 1, 12, 12, 6, 5, 5, 1, 2}, 5, true); // LeNet's conv1
  check_conv({1, 6, 14, 14, 4, 5, 5, 1, 0}, 6, false);
}

TEST(GradientCheck, Linear) {
  for (LinearShape s : {LinearShape{3, 7, 5}, LinearShape{1, 16, 3}, LinearShape{5, 9, 17}}) {
    Rng rng(uint64_t(s.N * 100 + s.I * 10 + s.O));
    const std::string name = "linear N" + std::to_string(s.N) + " I" + std::to_string(s.I) + " O" + std::to_string(s.O);
    std::vector<double> inp = uniform(std::size_t(s.N) * s.I, rng, -1, 1);
    std::vector<double> weight = uniform(std::size_t(s.O) * s.I, rng, -1, 1);
    std::vector<double> bias = uniform(std::size_t(s.O), rng, -1, 1);
    std::vector<double> R = uniform(std::size_t(s.N) * s.O, rng, -1, 1);
    std::vector<double> out(R.size());
    auto f = [&] {
      ref::linear_forward(out.data(), inp.data(), weight.data(), bias.data(), s);
      return project(out, R);
    };
    std::vector<double> dinp(inp.size(), 7.0), dweight(weight.size(), 7.0), dbias(bias.size(), 7.0);
    ref::linear_backward(dinp.data(), dweight.data(), dbias.data(), R.data(), inp.data(), weight.data(), s);
    check_gradient(name + " dinp", inp, dinp, f);
    check_gradient(name + " dweight", weight, dweight, f);
    check_gradient(name + " dbias", bias, dbias, f);
  }
}

TEST(GradientCheck, ReluSkipsTheKink) {
  Rng rng(11);
  std::vector<double> inp = uniform(257, rng, -1, 1);
  inp[3] = 0.0;   // exactly at the kink
  inp[4] = 4e-7;  // within h of it
  std::vector<double> R = uniform(inp.size(), rng, -1, 1), out(inp.size());
  auto f = [&] {
    ref::relu_forward(out.data(), inp.data(), int64_t(inp.size()));
    Eval e = project(out, R);
    for (double v : inp) e.pattern.push_back(v > 0);
    return e;
  };
  f();
  std::vector<double> dinp(inp.size());
  ref::relu_backward(dinp.data(), R.data(), out.data(), int64_t(inp.size()));
  Report r = check_gradient("relu", inp, dinp, f);
  EXPECT_GE(r.skipped, 2);
}

TEST(GradientCheck, MaxPoolSkipsNearTies) {
  for (PoolShape s : {PoolShape{6, 8, 8, 2}, PoolShape{3, 9, 6, 3}, PoolShape{2, 28, 28, 2}}) {
    Rng rng(uint64_t(s.NC * s.H + s.k));
    const std::string name = "maxpool NC" + std::to_string(s.NC) + " " + std::to_string(s.H) + "x" +
                             std::to_string(s.W) + " k" + std::to_string(s.k);
    std::vector<double> inp = uniform(std::size_t(s.NC) * s.H * s.W, rng, -1, 1);
    inp[1] = inp[0] + 5e-7;  // a near-tie in the first window
    const std::size_t out_n = std::size_t(s.NC) * s.P() * s.Q();
    std::vector<double> R = uniform(out_n, rng, -1, 1), out(out_n);
    std::vector<uint8_t> argmax(out_n);
    auto f = [&] {
      ref::maxpool2d_forward(out.data(), argmax.data(), inp.data(), s);
      Eval e = project(out, R);
      e.pattern = argmax;
      return e;
    };
    f();
    std::vector<double> dinp(inp.size(), 7.0);
    ref::maxpool2d_backward(dinp.data(), R.data(), argmax.data(), s);
    Report r = check_gradient(name, inp, dinp, f);
    EXPECT_GE(r.skipped, 1);
  }
}

TEST(GradientCheck, SoftmaxCrossEntropyMeanLoss) {
  for (int N : {1, 3, 7}) {
    const int K = 10;
    Rng rng{uint64_t(N)};
    std::vector<double> logits = uniform(std::size_t(N) * K, rng, -4, 4);
    if (N == 7) logits[5] = 60.0;  // a large logit: the stable path
    std::vector<uint8_t> labels(N);
    for (auto& l : labels) l = uint8_t(rng.below(K));
    std::vector<double> probs(logits.size());
    auto f = [&] {
      Eval e;
      e.value = ref::softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K);
      for (double v : logits) e.magnitude += std::fabs(v) / N;  // the terms log-sum-exp sums, per sample
      return e;
    };
    f();
    std::vector<double> dlogits(logits.size(), 7.0);
    ref::softmax_xent_backward(dlogits.data(), probs.data(), labels.data(), N, K, 1.0 / N);
    check_gradient("softmax_xent N" + std::to_string(N), logits, dlogits, f);
  }
}

// The whole network in double, in nn::make_lenet5()'s layer order, checked on every bias and a random
// sample of every weight tensor (all 61,706 would take minutes with the reference kernels).
TEST(GradientCheck, WholeLeNet5InDouble) {
  const int N = 2, K = 10;
  Rng rng(2024);
  struct Param {
    const char* name;
    std::vector<double> v, d;
  };
  auto init = [&](const char* name, std::size_t n, int fan_in) {
    double bound = 1.0 / std::sqrt(double(fan_in));  // PyTorch's default initialisation
    return Param{name, uniform(n, rng, -bound, bound), std::vector<double>(n)};
  };
  std::vector<Param> P;
  P.push_back(init("conv1.weight", 6 * 1 * 25, 25));
  P.push_back(init("conv1.bias", 6, 25));
  P.push_back(init("conv2.weight", 16 * 6 * 25, 150));
  P.push_back(init("conv2.bias", 16, 150));
  P.push_back(init("fc1.weight", 120 * 400, 400));
  P.push_back(init("fc1.bias", 120, 400));
  P.push_back(init("fc2.weight", 84 * 120, 120));
  P.push_back(init("fc2.bias", 84, 120));
  P.push_back(init("fc3.weight", 10 * 84, 84));
  P.push_back(init("fc3.bias", 10, 84));
  std::size_t total = 0;
  for (auto& p : P) total += p.v.size();
  ASSERT_EQ(total, 61706u);

  std::vector<double> x = uniform(std::size_t(N) * 28 * 28, rng, 0, 1);
  std::vector<uint8_t> labels = {3, 7};
  const Conv2dShape c1{N, 1, 28, 28, 6, 5, 5, 1, 2}, c2{N, 6, 14, 14, 16, 5, 5, 1, 0};
  const PoolShape p1{N * 6, 28, 28, 2}, p2{N * 16, 10, 10, 2};
  const LinearShape f1{N, 400, 120}, f2{N, 120, 84}, f3{N, 84, 10};
  std::vector<double> a1(N * 6 * 28 * 28), r1(a1.size()), m1(N * 6 * 14 * 14), a2(N * 16 * 10 * 10),
      r2(a2.size()), m2(N * 400), a3(N * 120), r3(a3.size()), a4(N * 84), r4(a4.size()), logits(N * K),
      probs(N * K);
  std::vector<uint8_t> arg1(m1.size()), arg2(m2.size());

  auto forward = [&] {
    ref::conv2d_forward(a1.data(), x.data(), P[0].v.data(), P[1].v.data(), c1);
    ref::relu_forward(r1.data(), a1.data(), int64_t(a1.size()));
    ref::maxpool2d_forward(m1.data(), arg1.data(), r1.data(), p1);
    ref::conv2d_forward(a2.data(), m1.data(), P[2].v.data(), P[3].v.data(), c2);
    ref::relu_forward(r2.data(), a2.data(), int64_t(a2.size()));
    ref::maxpool2d_forward(m2.data(), arg2.data(), r2.data(), p2);  // flatten: [N,16,5,5] is [N,400]
    ref::linear_forward(a3.data(), m2.data(), P[4].v.data(), P[5].v.data(), f1);
    ref::relu_forward(r3.data(), a3.data(), int64_t(a3.size()));
    ref::linear_forward(a4.data(), r3.data(), P[6].v.data(), P[7].v.data(), f2);
    ref::relu_forward(r4.data(), a4.data(), int64_t(a4.size()));
    ref::linear_forward(logits.data(), r4.data(), P[8].v.data(), P[9].v.data(), f3);
    Eval e;
    e.value = ref::softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K);
    e.magnitude = 1.0;
    for (double v : logits) e.magnitude += std::fabs(v) / N;
    for (const auto* a : {&a1, &a2, &a3, &a4})
      for (double v : *a) e.pattern.push_back(v > 0);
    e.pattern.insert(e.pattern.end(), arg1.begin(), arg1.end());
    e.pattern.insert(e.pattern.end(), arg2.begin(), arg2.end());
    return e;
  };

  forward();
  std::vector<double> dlogits(N * K), d4(a4.size()), d3(a3.size()), dm2(m2.size()), dr2(r2.size()), dm1(m1.size()),
      dr1(r1.size());
  ref::softmax_xent_backward(dlogits.data(), probs.data(), labels.data(), N, K, 1.0 / N);
  ref::linear_backward(d4.data(), P[8].d.data(), P[9].d.data(), dlogits.data(), r4.data(), P[8].v.data(), f3);
  ref::relu_backward(d4.data(), d4.data(), r4.data(), int64_t(d4.size()));
  ref::linear_backward(d3.data(), P[6].d.data(), P[7].d.data(), d4.data(), r3.data(), P[6].v.data(), f2);
  ref::relu_backward(d3.data(), d3.data(), r3.data(), int64_t(d3.size()));
  ref::linear_backward(dm2.data(), P[4].d.data(), P[5].d.data(), d3.data(), m2.data(), P[4].v.data(), f1);
  ref::maxpool2d_backward(dr2.data(), dm2.data(), arg2.data(), p2);
  ref::relu_backward(dr2.data(), dr2.data(), r2.data(), int64_t(dr2.size()));
  ref::conv2d_backward_weight(P[2].d.data(), P[3].d.data(), dr2.data(), m1.data(), c2);
  ref::conv2d_backward_data(dm1.data(), dr2.data(), P[2].v.data(), c2);
  ref::maxpool2d_backward(dr1.data(), dm1.data(), arg1.data(), p1);
  ref::relu_backward(dr1.data(), dr1.data(), r1.data(), int64_t(dr1.size()));
  ref::conv2d_backward_weight(P[0].d.data(), P[1].d.data(), dr1.data(), x.data(), c1);

  Rng pick(99);
  int checked = 0;
  for (auto& p : P) {
    std::vector<std::size_t> idx;
    if (p.v.size() <= 200) {
      for (std::size_t i = 0; i < p.v.size(); ++i) idx.push_back(i);
    } else {
      for (int i = 0; i < 400; ++i) idx.push_back(pick.below(uint32_t(p.v.size())));
      // Also the largest-gradient elements, where a relative error shows best.
      std::size_t best = 0;
      for (std::size_t i = 0; i < p.d.size(); ++i)
        if (std::fabs(p.d[i]) > std::fabs(p.d[best])) best = i;
      idx.push_back(best);
    }
    checked += check_gradient(std::string("lenet5 ") + p.name, p.v, p.d, forward, idx).checked;
  }
  EXPECT_GT(checked, 1500);
}
