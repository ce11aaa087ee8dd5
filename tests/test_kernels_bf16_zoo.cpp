// The bf16 tables' plain conv passes (conv2d_forward / backward_data / backward_weight) at the zoo's shapes
// (resnet18, mobilenet_v2, vit's patch embedding) and at odd ones: batch 1, channels not a multiple of 16,
// odd reduction lengths (a zero pair partner), stride 2, 7x7 and 5x5 kernels, 1x1, groups, taps that read
// only padding (3x3 on 1x1 maps), several GEMM chunks with a partial last one. On a CPU with AVX512_BF16
// the avx512 bf16 table runs vdpbf16ps kernels (ops/cpu/zoo_conv_bf16.inc) for these and depthwise kernels that
// round in the lanes; elsewhere, and for LeNet's shapes, the rounding fallback. Every level this CPU runs is tested.
//
// Bounds as in tests/test_kernels_bf16.cpp (docs/MIXED_PRECISION.md): operands rounded to bf16 (u_h = 2^-8),
// products exact in fp32, an fp32 sum of n terms within gamma(n) sum|terms| (u = 2^-24). Against
//   the twin, the exact result on the rounded operands:  gamma(n) M' + u |want|
//   the fp32 semantics (unrounded operands):            (2 u_h + u_h^2) M + gamma(n) M' + u |want|
//   the rounding composition at level ref (float sums, itself within the twin bound): twice the twin bound
// with M = the reference on |operands|, M' on |rounded operands|, n = the reduction length + 2: forward
// C/groups * R * S, backward-data K/groups * R * S (col2im adds the R * S taps' sums), backward-weight N * P * Q.
// dbias sums the rounded dout (no product): u_h relative to the fp32 semantics. Integer data (exact in bf16,
// exact sums) must give every pass bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/ops/attention.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

#include "kernel_test_util.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;

constexpr double kUh = 1.0 / 256.0;

struct Shape {
  const char* name;
  Conv2dShape s;
};
Conv2dShape conv(int N, int C, int H, int W, int K, int R, int stride, int pad, int groups = 1) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = s.S = R, s.stride = stride, s.pad = pad, s.groups = groups;
  return s;
}
// The zoo's shapes (28x28x1 inputs) at small batches, then odd ones.
std::vector<Shape> shapes() {
  return {{"resnet18 stem 1x28x28->64 k7s2", conv(3, 1, 28, 28, 64, 7, 2, 3)},
          {"resnet18 64x7x7->64 k3 (2 chunks)", conv(8, 64, 7, 7, 64, 3, 1, 1)},
          {"resnet18 64x7x7->64 k3, batch 13 (sample-pair chunks of 12 and 1)", conv(13, 64, 7, 7, 64, 3, 1, 1)},
          {"resnet18 64x7x7->128 k3s2", conv(5, 64, 7, 7, 128, 3, 2, 1)},
          {"resnet18 64x7x7->128 k1s2", conv(4, 64, 7, 7, 128, 1, 2, 0)},
          {"resnet18 128x4x4->128 k3", conv(6, 128, 4, 4, 128, 3, 1, 1)},
          {"resnet18 256x2x2->256 k3 (2 chunks)", conv(20, 256, 2, 2, 256, 3, 1, 1)},
          {"resnet18 512x1x1->512 k3 (centre tap)", conv(3, 512, 1, 1, 512, 3, 1, 1)},
          {"resnet18 256x2x2->512 k3s2 (one output pixel: the live taps' linear)", conv(3, 256, 2, 2, 512, 3, 2, 1)},
          {"one output pixel, 1x1 input at stride 2, C7 K9, batch 1", conv(1, 7, 1, 1, 9, 3, 2, 1)},
          {"one output pixel, 3x3 input, no padding, C17 K20", conv(2, 17, 3, 3, 20, 3, 1, 0)},
          {"one output pixel, stride 3 leaves a row out, C18 K17", conv(2, 18, 3, 3, 17, 3, 3, 1)},
          {"mobilenet_v2 stem 1x28x28->32 k3s2", conv(2, 1, 28, 28, 32, 3, 2, 1)},
          {"mobilenet_v2 pw 16x14x14->96", conv(3, 16, 14, 14, 96, 1, 1, 0)},
          {"mobilenet_v2 pw 144x7x7->24", conv(5, 144, 7, 7, 24, 1, 1, 0)},
          {"mobilenet_v2 pw 960x1x1->320", conv(4, 960, 1, 1, 320, 1, 1, 0)},
          {"mobilenet_v2 dw 96x14x14 s2", conv(3, 96, 14, 14, 96, 3, 2, 1, 96)},
          {"depthwise 3x3 s1, 17 channels, batch 17", conv(17, 17, 7, 7, 17, 3, 1, 1, 17)},
          {"vit patch 1x28x28->128 k7s7", conv(2, 1, 28, 28, 128, 7, 7, 0)},
          {"batch 1, C17 K19, 9x11", [] { auto s = conv(1, 17, 9, 11, 19, 3, 1, 1); return s; }()},
          {"batch 1, stride 2, K7", conv(1, 33, 5, 5, 7, 3, 2, 1)},
          {"pointwise odd K, batch 2", conv(2, 20, 6, 6, 35, 1, 1, 0)},
          {"5x5, C18 K21", conv(3, 18, 8, 8, 21, 5, 1, 2)},
          {"7x7 stem, 3 channels, batch 1", conv(1, 3, 15, 15, 17, 7, 2, 3)},
          {"groups 2, Cg17 Kg17", conv(2, 34, 5, 5, 34, 3, 1, 1, 2)},
          {"1x1 stride 2, K odd", conv(3, 24, 5, 5, 33, 1, 2, 0)},
          {"LeNet conv2 (fallback)", conv(3, 6, 14, 14, 16, 5, 1, 0)}};
}

// The three passes' results (bias included: the layers of the zoo mostly have none, vit's patch embedding has).
struct Passes {
  std::vector<float> y, dx, dw, db;
};
Passes run(const KernelTable& k, const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
           const std::vector<float>& b, const std::vector<float>& dy) {
  Passes p{std::vector<float>(dy.size(), NAN), std::vector<float>(x.size(), NAN), std::vector<float>(w.size(), NAN),
           std::vector<float>(b.size(), NAN)};
  k.conv2d_forward(p.y.data(), x.data(), w.data(), b.data(), s);
  k.conv2d_backward_data(p.dx.data(), dy.data(), w.data(), s);
  k.conv2d_backward_weight(p.dw.data(), p.db.data(), dy.data(), x.data(), s);
  return p;
}
struct RefPasses {
  std::vector<double> y, dx, dw, db;
};
RefPasses run_ref(const Conv2dShape& s, const std::vector<double>& x, const std::vector<double>& w,
                  const std::vector<double>& b, const std::vector<double>& dy) {
  RefPasses p{std::vector<double>(dy.size()), std::vector<double>(x.size()), std::vector<double>(w.size()),
              std::vector<double>(b.size())};
  ref::conv2d_forward(p.y.data(), x.data(), w.data(), b.data(), s);
  ref::conv2d_backward_data(p.dx.data(), dy.data(), w.data(), s);
  ref::conv2d_backward_weight(p.dw.data(), p.db.data(), dy.data(), x.data(), s);
  return p;
}

void expect_exact(const std::string& what, const std::vector<float>& got, const std::vector<double>& want) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(double(got[i]) == want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0) << what << ": integer data must give exact results";
}

class Bf16ZooConv : public LevelTest<IsaLevel> {
 protected:
  const KernelTable& k() const { return kernels_for(GetParam(), Precision::Bf16); }
};

TEST_P(Bf16ZooConv, WithinRoundingBoundsOfTwinAndFp32) {
  Rng rng(21);
  const KernelTable& twin = rounding_kernels_for(IsaLevel::Ref, Precision::Bf16);
  for (const Shape& sh : shapes()) {
    const Conv2dShape& s = sh.s;
    SCOPED_TRACE(sh.name);
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    auto w = random_vec(std::size_t(s.K) * s.Cg() * s.R * s.S, rng);
    auto b = random_vec(s.K, rng);
    auto dy = random_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng);
    const auto xr = rounded(x), wr = rounded(w), dyr = rounded(dy);
    const Passes got = run(k(), s, x, w, b, dy);
    const Passes ref = run(twin, s, x, w, b, dy);
    const RefPasses exact = run_ref(s, to_double(x), to_double(w), to_double(b), to_double(dy));
    const RefPasses on_rounded = run_ref(s, to_double(xr), to_double(wr), to_double(b), to_double(dyr));
    const RefPasses mag = run_ref(s, abs_double(x), abs_double(w), abs_double(b), abs_double(dy));
    const RefPasses magr = run_ref(s, abs_double(xr), abs_double(wr), abs_double(b), abs_double(dyr));
    const double nf = double(s.Cg()) * s.R * s.S + 2, nd = double(s.Kg()) * s.R * s.S + 2,
                 nw = double(s.N) * s.P() * s.Q() + 2, r2 = 2 * kUh + kUh * kUh;
    expect_within("out vs twin", got.y, on_rounded.y, mag.y, 0.0, magr.y, gamma(nf));
    expect_within("dinp vs twin", got.dx, on_rounded.dx, mag.dx, 0.0, magr.dx, gamma(nd));
    expect_within("dweight vs twin", got.dw, on_rounded.dw, mag.dw, 0.0, magr.dw, gamma(nw));
    expect_within("dbias vs twin", got.db, on_rounded.db, mag.db, 0.0, magr.db, gamma(nw));
    const std::vector<double> ry = to_double(ref.y), rdx = to_double(ref.dx), rdw = to_double(ref.dw),
                              rdb = to_double(ref.db);
    expect_within("out vs level-ref twin", got.y, ry, mag.y, 0.0, magr.y, 2 * gamma(nf));
    expect_within("dinp vs level-ref twin", got.dx, rdx, mag.dx, 0.0, magr.dx, 2 * gamma(nd));
    expect_within("dweight vs level-ref twin", got.dw, rdw, mag.dw, 0.0, magr.dw, 2 * gamma(nw));
    expect_within("out vs fp32", got.y, exact.y, mag.y, r2, magr.y, gamma(nf));
    expect_within("dinp vs fp32", got.dx, exact.dx, mag.dx, r2, magr.dx, gamma(nd));
    expect_within("dweight vs fp32", got.dw, exact.dw, mag.dw, r2, magr.dw, gamma(nw));
    expect_within("dbias vs fp32", got.db, exact.db, mag.db, kUh, magr.db, gamma(nw));
    // Without dbias (the zoo's convs have no bias) the weight gradient keeps its bits.
    std::vector<float> dw2(w.size(), NAN);
    k().conv2d_backward_weight(dw2.data(), nullptr, dy.data(), x.data(), s);
    EXPECT_EQ(0, std::memcmp(dw2.data(), got.dw.data(), dw2.size() * 4)) << "dweight without dbias differs";
  }
}

TEST_P(Bf16ZooConv, IntegerDataExact) {
  Rng rng(22);
  for (const Shape& sh : shapes()) {
    const Conv2dShape& s = sh.s;
    SCOPED_TRACE(sh.name);
    // integers in [-3, 3] and eighths in [-0.5, 0.5]: exact in bf16, every partial sum exact in fp32
    auto x = integer_vec(std::size_t(s.N) * s.C * s.H * s.W, rng, 3, 1.0f);
    auto w = integer_vec(std::size_t(s.K) * s.Cg() * s.R * s.S, rng, 4, 0.125f);
    auto b = integer_vec(s.K, rng, 4, 0.125f);
    auto dy = integer_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng, 3, 1.0f);
    const Passes got = run(k(), s, x, w, b, dy);
    const RefPasses want = run_ref(s, to_double(x), to_double(w), to_double(b), to_double(dy));
    expect_exact("out", got.y, want.y);
    expect_exact("dinp", got.dx, want.dx);
    expect_exact("dweight", got.dw, want.dw);
    expect_exact("dbias", got.db, want.db);
  }
}

std::vector<IsaLevel> levels() { return supported_isas(); }
std::string level_name(const ::testing::TestParamInfo<IsaLevel>& info) { return isa_name(info.param); }
INSTANTIATE_TEST_SUITE_P(Levels, Bf16ZooConv, ::testing::ValuesIn(levels()), level_name);

// The AVX2 bf16 table's conv passes round their operands where the kernels copy them (kernels_bf16_avx2.cpp):
// they must give the bits of the rounding composition (round whole tensors, then the fp32 AVX2 kernels) for
// every shape, the depthwise and implicit-GEMM ones included, random data, with and without dbias.
TEST(Bf16ZooConvAvx2, RoundingWhereCopiedGivesTheCompositionsBits) {
  if (detect_isa() < IsaLevel::Avx2) GTEST_SKIP() << "this CPU has no AVX2 (not faked)";
  const KernelTable& fused = kernels_for(IsaLevel::Avx2, Precision::Bf16);
  const KernelTable& composed = rounding_kernels_for(IsaLevel::Avx2, Precision::Bf16);
  ASSERT_NE(fused.conv2d_forward, composed.conv2d_forward);
  Rng rng(23);
  for (const Shape& sh : shapes()) {
    const Conv2dShape& s = sh.s;
    SCOPED_TRACE(sh.name);
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    auto w = random_vec(std::size_t(s.K) * s.Cg() * s.R * s.S, rng);
    auto b = random_vec(s.K, rng);
    auto dy = random_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng);
    const Passes got = run(fused, s, x, w, b, dy), want = run(composed, s, x, w, b, dy);
    EXPECT_EQ(0, std::memcmp(got.y.data(), want.y.data(), got.y.size() * 4)) << "forward";
    EXPECT_EQ(0, std::memcmp(got.dx.data(), want.dx.data(), got.dx.size() * 4)) << "backward-data";
    EXPECT_EQ(0, std::memcmp(got.dw.data(), want.dw.data(), got.dw.size() * 4)) << "backward-weight";
    EXPECT_EQ(0, std::memcmp(got.db.data(), want.db.data(), got.db.size() * 4)) << "bias gradient";
  }
}

// vit's attention core in the bf16 tables of levels avx2 and avx512 rounds q, k, v and dout as it loads them:
// the bits of the composition (rounded copies into the fp32 kernel), odd batches and token counts included.
TEST(Bf16Attention, RoundingOnLoadGivesTheCompositionsBits) {
  for (IsaLevel l : {IsaLevel::Avx2, IsaLevel::Avx512}) {
    if (detect_isa() < l) continue;
    SCOPED_TRACE(isa_name(l));
    const KernelTable& fused = kernels_for(l, Precision::Bf16);
    const KernelTable& composed = rounding_kernels_for(l, Precision::Bf16);
    ASSERT_NE(fused.attention_forward, composed.attention_forward);
    Rng rng(24);
    for (const AttentionShape& a : {AttentionShape{4, 17, 128, 4}, AttentionShape{3, 5, 24, 3}, AttentionShape{1, 9, 16, 1}}) {
      const std::size_t nq = std::size_t(a.N) * a.T * 3 * a.D, no = std::size_t(a.N) * a.T * a.D,
                        np = std::size_t(a.N) * a.H * a.T * a.T;
      const auto qkv = random_vec(nq, rng, -2.0f, 2.0f), dout = random_vec(no, rng);
      std::vector<float> o1(no), o2(no), p1(np), p2(np), d1(nq), d2(nq);
      fused.attention_forward(o1.data(), p1.data(), qkv.data(), a);
      composed.attention_forward(o2.data(), p2.data(), qkv.data(), a);
      EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), no * 4)) << "out";
      EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), np * 4)) << "probs";
      fused.attention_backward(d1.data(), dout.data(), qkv.data(), p1.data(), a);
      composed.attention_backward(d2.data(), dout.data(), qkv.data(), p2.data(), a);
      EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), nq * 4)) << "dqkv";
    }
  }
}

// Which conv passes run vdpbf16ps: the zoo's GEMM shapes where the CPU has AVX512_BF16; at level avx2 the
// rounding-where-copied table above; the rounding composition elsewhere.
TEST(Bf16ZooConvDispatch, DotProductKernelsOnlyWhereTheCpuHasThem) {
  if (detect_isa() < IsaLevel::Avx512 || !cpu_has_avx512_bf16()) {
    for (IsaLevel l : supported_isas())
      if (l != IsaLevel::Avx2)
        EXPECT_EQ(kernels_for(l, Precision::Bf16).conv2d_forward, rounding_kernels_for(l, Precision::Bf16).conv2d_forward);
    GTEST_SKIP() << "no AVX512_BF16 on this CPU: the bf16 convs round their operands and run the fp32 kernels";
  }
  const KernelTable& fast = kernels_for(IsaLevel::Avx512, Precision::Bf16);
  const KernelTable& fallback = rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16);
  EXPECT_NE(fast.conv2d_forward, fallback.conv2d_forward);
  EXPECT_NE(fast.conv2d_backward_data, fallback.conv2d_backward_data);
  EXPECT_NE(fast.conv2d_backward_weight, fallback.conv2d_backward_weight);
  EXPECT_EQ(kernels_for(IsaLevel::Scalar, Precision::Bf16).conv2d_forward,
            rounding_kernels_for(IsaLevel::Scalar, Precision::Bf16).conv2d_forward);
}

}  // namespace
}  // namespace ringtrain::ops
