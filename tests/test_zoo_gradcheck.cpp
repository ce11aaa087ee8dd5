// Finite-difference gradient checks in double precision of the zoo's reference ops (ops::ref::*<double>):
// grouped, depthwise, strided and padded conv2d, max-pool 3/2/1 and global average pool. The method and the
// tolerance are gradcheck.h's; elements whose +-h perturbation changes a max-pool window's winner (a kink)
// are skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "gradcheck.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/pool.h"

using namespace ringtrain;
using namespace ringtrain::ops;
using namespace ringtrain::gradcheck;

namespace {

Conv2dShape conv(int N, int C, int H, int W, int K, int R, int S, int stride, int pad, int groups) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S, s.stride = stride, s.pad = pad, s.groups = groups;
  return s;
}

void check_conv(const Conv2dShape& s, uint64_t seed, bool with_bias) {
  Rng rng(seed);
  char buf[160];
  std::snprintf(buf, sizeof buf, "conv2d N%d C%d %dx%d K%d %dx%d st%d pad%d groups%d%s", s.N, s.C, s.H, s.W, s.K, s.R,
                s.S, s.stride, s.pad, s.groups, with_bias ? "" : " no bias");
  const std::string name = buf;
  SCOPED_TRACE(name);
  std::vector<double> inp = uniform(std::size_t(s.N) * s.C * s.H * s.W, rng);
  std::vector<double> weight = uniform(std::size_t(s.K) * s.Cg() * s.R * s.S, rng);
  std::vector<double> bias = uniform(std::size_t(s.K), rng);
  const std::size_t out_n = std::size_t(s.N) * s.K * s.P() * s.Q();
  std::vector<double> R = uniform(out_n, rng), out(out_n);
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

TEST(ZooGradientCheck, GroupedStridedPaddedConv) {
  check_conv(conv(2, 4, 7, 6, 6, 3, 3, 1, 1, 2), 1, true);    // groups 2
  check_conv(conv(2, 6, 9, 8, 9, 3, 2, 2, 1, 3), 2, false);   // groups 3, stride 2, rectangular kernel
  check_conv(conv(1, 4, 10, 9, 8, 5, 5, 3, 2, 2), 3, true);   // stride 3, padding 2
  check_conv(conv(2, 5, 7, 7, 5, 3, 3, 1, 1, 5), 4, true);    // depthwise
  check_conv(conv(2, 6, 8, 9, 6, 3, 3, 2, 1, 6), 5, false);   // depthwise stride 2
  check_conv(conv(3, 3, 6, 6, 4, 1, 1, 2, 0, 1), 6, false);   // strided 1x1 (resnet's downsample)
  check_conv(conv(2, 1, 14, 14, 3, 7, 7, 7, 0, 1), 7, true);  // the ViT's patch embedding
}

TEST(ZooGradientCheck, MaxPoolStridedPadded) {
  for (auto [NC, H, W, k, st, pad] : {std::array{3, 14, 14, 3, 2, 1}, std::array{2, 7, 8, 3, 2, 1},
                                      std::array{4, 5, 5, 2, 1, 1}}) {
    PoolShape s{NC, H, W, k};
    s.stride = st;
    s.pad = pad;
    Rng rng(uint64_t(NC * 100 + H));
    const std::string name = "maxpool NC" + std::to_string(NC) + " " + std::to_string(H) + "x" + std::to_string(W) +
                             " k" + std::to_string(k) + " s" + std::to_string(st) + " p" + std::to_string(pad);
    std::vector<double> inp = uniform(std::size_t(NC) * H * W, rng);
    inp[1] = inp[0] + 5e-7;  // a near-tie
    const std::size_t out_n = std::size_t(NC) * s.P() * s.Q();
    std::vector<double> R = uniform(out_n, rng), out(out_n);
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
    check_gradient(name, inp, dinp, f);
  }
}

TEST(ZooGradientCheck, GlobalAveragePool) {
  for (auto [NC, HW] : {std::pair{6, 49}, std::pair{5, 4}, std::pair{3, 1}}) {
    Rng rng(uint64_t(NC * 10 + HW));
    std::vector<double> inp = uniform(std::size_t(NC) * HW, rng), R = uniform(std::size_t(NC), rng),
                        out(NC);
    auto f = [&] {
      ref::avgpool_global_forward(out.data(), inp.data(), NC, HW);
      return project(out, R);
    };
    std::vector<double> dinp(inp.size(), 7.0);
    ref::avgpool_global_backward(dinp.data(), R.data(), NC, HW);
    check_gradient("avgpool_global NC" + std::to_string(NC) + " HW" + std::to_string(HW), inp, dinp, f);
  }
}
