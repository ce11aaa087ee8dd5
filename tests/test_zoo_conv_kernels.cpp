// The zoo's convolution and pooling kernels (ops/cpu/zoo_conv_impl.inc) at every ISA level this CPU runs,
// against the reference kernels in double precision: resnet18's, mobilenet_v2's and the ViT's conv shapes
// at batch 64 and 1, 3, 17, then odd shapes (channels that fill no vector, groups 2, depthwise, strides 1-3,
// kernels 1-9, padding, windows that tile the input), forward and both backward passes; strided / padded max-pool and global average
// pool; the 16-bit fallback tables on grouped convs.
//
// Tolerances are derived as in test_kernels.cpp: a float sum of n products, in any order, with or without
// FMA, is within gamma(n) * sum|terms| of the exact sum (gamma(n) = n u / (1 - n u), u = 2^-24); sum|terms|
// is the reference run on |inputs|, n the reduction length plus 2 (bias add, final rounding):
// forward Cg*R*S, backward-data Kg*R*S, backward-weight N*P*Q. Max-pool has no arithmetic: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "kernel_test_util.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;  // kU, gamma, random data, expect_close, rounded (kernel_test_util.h)

Conv2dShape conv(int N, int C, int H, int W, int K, int RS, int stride, int pad, int groups = 1) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = s.S = RS, s.stride = stride, s.pad = pad, s.groups = groups;
  return s;
}

std::string conv_name(const Conv2dShape& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "N%d_C%d_%dx%d_K%d_%dx%d_st%d_pad%d_g%d", s.N, s.C, s.H, s.W, s.K, s.R, s.S,
                s.stride, s.pad, s.groups);
  return buf;
}

// Per-sample zoo shapes (N set by the caller).
std::vector<Conv2dShape> zoo_shapes() {
  std::vector<Conv2dShape> z = {
      // resnet18 on 28x28x1
      conv(1, 1, 28, 28, 64, 7, 2, 3), conv(1, 64, 7, 7, 64, 3, 1, 1), conv(1, 64, 7, 7, 128, 3, 2, 1),
      conv(1, 64, 7, 7, 128, 1, 2, 0), conv(1, 128, 4, 4, 128, 3, 1, 1), conv(1, 128, 4, 4, 256, 3, 2, 1),
      conv(1, 128, 4, 4, 256, 1, 2, 0), conv(1, 256, 2, 2, 256, 3, 1, 1), conv(1, 256, 2, 2, 512, 3, 2, 1),
      conv(1, 256, 2, 2, 512, 1, 2, 0), conv(1, 512, 1, 1, 512, 3, 1, 1),
      // mobilenet_v2: stem, depthwise 3x3 (s1, s2), pointwise
      conv(1, 1, 28, 28, 32, 3, 2, 1), conv(1, 32, 14, 14, 32, 3, 1, 1, 32), conv(1, 96, 14, 14, 96, 3, 2, 1, 96),
      conv(1, 144, 7, 7, 144, 3, 1, 1, 144), conv(1, 144, 7, 7, 144, 3, 2, 1, 144),
      conv(1, 192, 4, 4, 192, 3, 1, 1, 192), conv(1, 192, 4, 4, 192, 3, 2, 1, 192),
      conv(1, 576, 2, 2, 576, 3, 1, 1, 576), conv(1, 576, 2, 2, 576, 3, 2, 1, 576),
      conv(1, 960, 1, 1, 960, 3, 1, 1, 960), conv(1, 32, 14, 14, 16, 1, 1, 0), conv(1, 16, 14, 14, 96, 1, 1, 0),
      conv(1, 96, 7, 7, 24, 1, 1, 0), conv(1, 24, 7, 7, 144, 1, 1, 0), conv(1, 144, 4, 4, 32, 1, 1, 0),
      conv(1, 64, 2, 2, 384, 1, 1, 0), conv(1, 384, 2, 2, 96, 1, 1, 0), conv(1, 960, 1, 1, 320, 1, 1, 0),
      conv(1, 320, 1, 1, 1280, 1, 1, 0),
      // vit patch embedding
      conv(1, 1, 28, 28, 128, 7, 7, 0)};
  return z;
}

// Channels that fill no vector, groups 2 and depthwise, strides 1-3, kernels 1-7, padding.
std::vector<Conv2dShape> odd_shapes() {
  std::vector<Conv2dShape> out;
  for (int N : {3, 17}) {
    out.push_back(conv(N, 19, 9, 11, 23, 3, 1, 1));        // general, stride 1
    out.push_back(conv(N, 20, 10, 9, 34, 5, 2, 2));        // stride 2, pad 2
    out.push_back(conv(N, 18, 11, 13, 21, 7, 3, 3));       // 7x7, stride 3
    out.push_back(conv(N, 22, 6, 7, 18, 2, 1, 0));         // even kernel
    out.push_back(conv(N, 18, 9, 9, 26, 3, 2, 1, 2));      // groups 2
    out.push_back(conv(N, 34, 5, 5, 30, 1, 1, 0, 2));      // pointwise, groups 2
    out.push_back(conv(N, 17, 13, 12, 40, 1, 1, 0));       // pointwise with 156-wide planes (direct GEMM)
    out.push_back(conv(N, 40, 12, 12, 17, 1, 1, 0));       // direct, narrow output
    out.push_back(conv(N, 33, 5, 6, 19, 1, 2, 0));         // strided 1x1
    out.push_back(conv(N, 21, 9, 10, 21, 3, 1, 1, 21));    // depthwise
    out.push_back(conv(N, 13, 17, 19, 13, 5, 2, 2, 13));   // depthwise 5x5 stride 2
    out.push_back(conv(N, 11, 8, 7, 11, 3, 3, 0, 11));     // depthwise stride 3, no padding
    out.push_back(conv(N, 10, 3, 3, 10, 3, 1, 1, 10));     // depthwise, plane smaller than a vector
    out.push_back(conv(N, 6, 5, 1, 6, 3, 1, 1, 6));        // depthwise flat plane one pixel wide: side taps all out
    out.push_back(conv(N, 5, 3, 16, 5, 3, 1, 1, 5));       // depthwise flat plane, rows of a whole vector
    out.push_back(conv(N, 21, 2, 2, 21, 3, 1, 1, 21));     // depthwise on a small map: channels in the lanes
    out.push_back(conv(N, 19, 2, 1, 19, 3, 2, 1, 19));     // depthwise small map, stride 2, uneven plane
    out.push_back(conv(N, 13, 1, 1, 13, 3, 1, 1, 13));     // depthwise 1x1: only the centre tap reads data
    out.push_back(conv(N, 7, 2, 2, 7, 5, 1, 2, 7));        // depthwise 5x5 on a 2x2 map, 7 channels
    // Whole planes in the lanes (stride 1, H*W dividing the vector: dw_planes_* in zoo_conv_impl.inc)
    out.push_back(conv(N, 21, 4, 4, 21, 3, 1, 1, 21));     // 4x4: a plane a vector on AVX-512, by tap
    out.push_back(conv(N, 11, 2, 4, 11, 3, 1, 1, 11));     // 2x4: two planes a vector on AVX-512, one on AVX2
    out.push_back(conv(N, 9, 1, 2, 9, 3, 1, 1, 9));        // 1x2
    out.push_back(conv(N, 6, 4, 4, 6, 5, 1, 2, 6));        // 5x5 on a 4x4 map
    out.push_back(conv(N, 5, 2, 2, 5, 1, 1, 0, 5));        // 1x1 kernel: each plane scaled, no permute
    out.push_back(conv(N, 35, 1, 1, 35, 3, 1, 1, 35));     // 1x1 map, channels past two vectors
    // Rows of a plane in the lanes (3x3 stride 1, rows of at most a vector: dw_rows_* in zoo_conv_impl.inc)
    out.push_back(conv(N, 6, 10, 12, 6, 3, 1, 0, 6));      // no padding: source rows wider than the output's
    out.push_back(conv(N, 4, 9, 14, 4, 3, 1, 2, 4));       // padding 2: output rows of a whole AVX-512 vector
    out.push_back(conv(N, 7, 11, 5, 7, 3, 1, 1, 7));       // three rows a vector on AVX-512, last block short
    out.push_back(conv(N, 5, 9, 7, 5, 3, 1, 0, 5));        // no padding, two 7-wide source rows a vector
    // Shifted row loads (AVX2: 3x3 stride 1 padding 1, rows of at most two vectors: dw_same_* in zoo_conv_impl.inc)
    out.push_back(conv(N, 9, 6, 9, 9, 3, 1, 1, 9));        // rows of 9: two vectors, the second one lane
    out.push_back(conv(N, 7, 5, 8, 7, 3, 1, 1, 7));        // rows of exactly one vector
    out.push_back(conv(N, 3, 2, 13, 3, 3, 1, 1, 3));       // two rows a plane: every row next to the padding
    // Strided depthwise with odd widths (the samples-in-lanes kernels)
    out.push_back(conv(N, 7, 11, 13, 7, 3, 2, 1, 7));      // stride 2, odd width
    out.push_back(conv(N, 5, 12, 15, 5, 3, 2, 0, 5));      // stride 2, no padding
    out.push_back(conv(N, 9, 6, 6, 9, 3, 2, 1, 9));        // stride 2, 6-wide rows
    out.push_back(conv(N, 12, 8, 8, 24, 3, 1, 1, 4));      // 4 groups of 3 -> 6
    out.push_back(conv(N, 30, 6, 6, 20, 3, 1, 0, 10));     // 10 groups of 3 -> 2
    out.push_back(conv(N, 17, 3, 3, 33, 3, 1, 2));         // padding larger than the plane's half
    out.push_back(conv(N, 9, 2, 3, 12, 5, 2, 2));          // taps that read only padding (left out)
    out.push_back(conv(N, 5, 1, 1, 6, 3, 4, 3));           // no tap reads the plane: bias only
    out.push_back(conv(N, 9, 7, 9, 8, 3, 4, 2));           // stride 4 (4 residue classes), K = half a 16-block
    out.push_back(conv(N, 16, 3, 5, 40, 4, 2, 1));         // even kernel, stride 2, padded, K not a multiple of 16
    // Windows that tile the input (stride = kernel, no padding: the linear on patches, conv_on_patches)
    out.push_back(conv(N, 3, 12, 15, 20, 3, 3, 0));        // 3 channels, 4x5 patches, K fills no vector
    out.push_back(conv(N, 2, 18, 18, 17, 9, 9, 0));        // patch rows wider than an AVX2 vector
    out.push_back(conv(N, 5, 6, 8, 24, 2, 2, 0));          // even kernel
    out.push_back(conv(N, 4, 13, 14, 20, 3, 3, 0));        // stride = kernel, but the last pixels unread
  }
  return out;
}

std::vector<Conv2dShape> all_shapes() {
  std::vector<Conv2dShape> out;
  for (int N : {64, 1, 3, 17})
    for (Conv2dShape s : zoo_shapes()) {
      s.N = N;
      out.push_back(s);
    }
  for (const Conv2dShape& s : odd_shapes()) out.push_back(s);
  return out;
}

std::size_t in_size(const Conv2dShape& s) { return std::size_t(s.N) * s.C * s.H * s.W; }
std::size_t out_size(const Conv2dShape& s) { return std::size_t(s.N) * s.K * s.P() * s.Q(); }
std::size_t w_size(const Conv2dShape& s) { return std::size_t(s.K) * s.Cg() * s.R * s.S; }

// One shape's random operands and the double-precision reference results, each pass computed on first
// use and kept for every level (the reference is most of this test's time).
struct Case {
  Conv2dShape s;
  std::vector<float> x, w, b, dy;
  std::vector<double> y, y_mag, dx, dx_mag, dw, dw_mag, db, db_mag;
};

enum Pass { Forward, BackwardData, BackwardWeight };

const Case& reference_case(const Conv2dShape& s, Pass pass) {
  static std::map<std::string, Case> cache;
  auto [it, fresh] = cache.try_emplace(conv_name(s));
  Case& c = it->second;
  if (fresh) {
    Rng rng(uint64_t(std::hash<std::string>{}(conv_name(s))));
    c.s = s;
    c.x = random_vec(in_size(s), rng);
    c.w = random_vec(w_size(s), rng);
    c.b = random_vec(s.K, rng);
    c.dy = random_vec(out_size(s), rng);
  }
  if (pass == Forward && c.y.empty()) {
    c.y.resize(out_size(s)), c.y_mag.resize(out_size(s));
    ref::conv2d_forward(c.y.data(), to_double(c.x).data(), to_double(c.w).data(), to_double(c.b).data(), s);
    ref::conv2d_forward(c.y_mag.data(), abs_double(c.x).data(), abs_double(c.w).data(), abs_double(c.b).data(), s);
  }
  if (pass == BackwardData && c.dx.empty()) {
    c.dx.resize(in_size(s)), c.dx_mag.resize(in_size(s));
    ref::conv2d_backward_data(c.dx.data(), to_double(c.dy).data(), to_double(c.w).data(), s);
    ref::conv2d_backward_data(c.dx_mag.data(), abs_double(c.dy).data(), abs_double(c.w).data(), s);
  }
  if (pass == BackwardWeight && c.dw.empty()) {
    c.dw.resize(w_size(s)), c.dw_mag.resize(w_size(s)), c.db.resize(s.K), c.db_mag.resize(s.K);
    ref::conv2d_backward_weight(c.dw.data(), c.db.data(), to_double(c.dy).data(), to_double(c.x).data(), s);
    ref::conv2d_backward_weight(c.dw_mag.data(), c.db_mag.data(), abs_double(c.dy).data(), abs_double(c.x).data(), s);
  }
  return c;
}

bool level_under_test(IsaLevel level) {
  const char* env = std::getenv("RINGTRAIN_ISA");
  return !(env && *env) || level == IsaLevel::Ref || level == parse_isa(env);
}

class ZooConvTest : public ::testing::TestWithParam<IsaLevel> {
 protected:
  void SetUp() override {
    if (!level_under_test(GetParam()))
      GTEST_SKIP() << "RINGTRAIN_ISA=" << std::getenv("RINGTRAIN_ISA") << " selects another level";
  }
  const KernelTable& k() { return kernels_for(GetParam()); }
};

TEST_P(ZooConvTest, Conv2dForward) {
  for (const Conv2dShape& s : all_shapes()) {
    SCOPED_TRACE(conv_name(s));
    const Case& c = reference_case(s, Forward);
    std::vector<float> y(out_size(s), NAN);
    k().conv2d_forward(y.data(), c.x.data(), c.w.data(), c.b.data(), s);
    expect_close("out", y, c.y, c.y_mag, s.Cg() * s.R * s.S + 2);
  }
}

TEST_P(ZooConvTest, Conv2dForwardWithoutBias) {
  for (const Conv2dShape& s : odd_shapes()) {
    SCOPED_TRACE(conv_name(s));
    const Case& c = reference_case(s, Forward);
    std::vector<float> y(out_size(s), NAN);
    k().conv2d_forward(y.data(), c.x.data(), c.w.data(), nullptr, s);
    std::vector<double> want(out_size(s)), mag(out_size(s));
    ref::conv2d_forward(want.data(), to_double(c.x).data(), to_double(c.w).data(), static_cast<const double*>(nullptr), s);
    ref::conv2d_forward(mag.data(), abs_double(c.x).data(), abs_double(c.w).data(), static_cast<const double*>(nullptr), s);
    expect_close("out", y, want, mag, s.Cg() * s.R * s.S + 2);
  }
}

TEST_P(ZooConvTest, Conv2dBackwardData) {
  for (const Conv2dShape& s : all_shapes()) {
    SCOPED_TRACE(conv_name(s));
    const Case& c = reference_case(s, BackwardData);
    std::vector<float> dx(in_size(s), NAN);
    k().conv2d_backward_data(dx.data(), c.dy.data(), c.w.data(), s);
    expect_close("dinp", dx, c.dx, c.dx_mag, s.Kg() * s.R * s.S + 2);
  }
}

TEST_P(ZooConvTest, Conv2dBackwardWeight) {
  for (const Conv2dShape& s : all_shapes()) {
    SCOPED_TRACE(conv_name(s));
    const Case& c = reference_case(s, BackwardWeight);
    std::vector<float> dw(w_size(s), NAN), db(s.K, NAN);
    k().conv2d_backward_weight(dw.data(), db.data(), c.dy.data(), c.x.data(), s);
    const double n = double(s.N) * s.P() * s.Q() + 2;
    expect_close("dweight", dw, c.dw, c.dw_mag, n);
    expect_close("dbias", db, c.db, c.db_mag, n);
    // Without a bias the weight gradient is the same.
    std::vector<float> dw2(w_size(s), NAN);
    k().conv2d_backward_weight(dw2.data(), nullptr, c.dy.data(), c.x.data(), s);
    EXPECT_EQ(0, std::memcmp(dw2.data(), dw.data(), dw.size() * sizeof(float))) << "dweight without dbias";
  }
}

// A max-pool shape: NC planes of H x W, a k x k window, stride st, padding pad.
PoolShape pool(int NC, int H, int W, int k, int st, int pad) {
  PoolShape s{NC, H, W, k};
  s.stride = st;
  s.pad = pad;
  return s;
}

// Max-pool with stride and padding: no arithmetic, so exact, ties (integer data) and NaNs included.
TEST_P(ZooConvTest, MaxPoolStridedPaddedExact) {
  const PoolShape shapes[] = {pool(64 * 64, 14, 14, 3, 2, 1), pool(5, 7, 8, 3, 2, 1), pool(3, 9, 9, 2, 1, 1),
                              pool(4, 5, 6, 3, 1, 0),         pool(2, 1, 1, 3, 2, 1), pool(3, 10, 11, 5, 3, 2),
                              pool(6, 6, 6, 2, 0, 0),         pool(2, 9, 10, 3, 0, 0)};
  Rng rng(21);
  for (const PoolShape& s : shapes) {
    SCOPED_TRACE("NC" + std::to_string(s.NC) + " " + std::to_string(s.H) + "x" + std::to_string(s.W) + " k" +
                 std::to_string(s.k) + " s" + std::to_string(s.st()) + " p" + std::to_string(s.pad));
    std::vector<float> x(std::size_t(s.NC) * s.H * s.W);
    for (auto& v : x) v = float(int(rng.below(5)) - 2);  // plenty of ties
    for (std::size_t i = 0; i < x.size(); i += 37) x[i] = NAN;
    const std::size_t no = std::size_t(s.NC) * s.P() * s.Q();
    std::vector<float> y(no), wy(no), dy = random_vec(no, rng), dx(x.size(), NAN), wdx(x.size());
    std::vector<uint8_t> am(no), wam(no);
    k().maxpool2d_forward(y.data(), am.data(), x.data(), s);
    ref::maxpool2d_forward(wy.data(), wam.data(), x.data(), s);
    EXPECT_EQ(0, std::memcmp(y.data(), wy.data(), no * sizeof(float)));  // NaNs too, bit for bit
    EXPECT_EQ(am, wam);
    k().maxpool2d_backward(dx.data(), dy.data(), am.data(), s);
    ref::maxpool2d_backward(wdx.data(), dy.data(), wam.data(), s);
    EXPECT_EQ(0, std::memcmp(dx.data(), wdx.data(), dx.size() * sizeof(float)));
  }
}

// The vectorised max-pool (issue 14: L planes in the vector lanes) against the reference, bit for bit, on every
// table of this level (fp32 and the 16-bit ones, which share the fp32 pool): the ResNet stem's shape at batch
// 64 and 1, LeNet-5's 2x2 (its own kernel), plane counts that fill no vector (1, 5, 17, 33: a short last
// group), odd and tiny planes, windows 1-5, strides 1-3, padding 0-2. Three kinds of data: random floats with
// duplicates (every value drawn from 16, so windows tie), small integers (mostly ties) and data with NaNs,
// -inf, +inf and signed zeros; dout includes -0.0f and overlapping windows add several gradients to one input.
TEST_P(ZooConvTest, MaxPoolVectorisedMatchesReference) {
  const PoolShape shapes[] = {
      pool(64 * 64, 14, 14, 3, 2, 1),  // resnet18's stem pool at the zoo's batch 64 (28x28 input)
      pool(64, 14, 14, 3, 2, 1),       // the same at batch 1
      pool(5 * 6, 28, 28, 2, 2, 0),    // LeNet-5's pool of conv1 (5 samples)
      pool(3 * 16, 10, 10, 2, 2, 0),   // and of conv2
      pool(17, 14, 14, 3, 2, 1), pool(33, 13, 15, 3, 2, 1), pool(5, 7, 9, 3, 1, 1), pool(1, 14, 14, 3, 2, 1),
      pool(19, 9, 11, 2, 1, 0),  pool(18, 9, 11, 2, 1, 1), pool(20, 8, 8, 2, 2, 1), pool(7, 11, 10, 3, 1, 0),
      pool(16, 5, 5, 3, 2, 0),   pool(3, 3, 3, 3, 1, 1),   pool(21, 2, 2, 3, 2, 1), pool(9, 1, 1, 1, 1, 0),
      pool(16, 6, 7, 3, 3, 0),   pool(6, 10, 11, 5, 3, 2), pool(2, 17, 3, 4, 2, 2), pool(40, 4, 4, 2, 0, 0)};
  Rng rng(23);
  std::vector<const KernelTable*> tables = {&k()};
  for (Precision p : {Precision::Bf16, Precision::Fp16}) tables.push_back(&kernels_for(GetParam(), p));
  for (const PoolShape& s : shapes)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("NC" + std::to_string(s.NC) + " " + std::to_string(s.H) + "x" + std::to_string(s.W) + " k" +
                   std::to_string(s.k) + " s" + std::to_string(s.st()) + " p" + std::to_string(s.pad) + " data " +
                   std::to_string(kind));
      std::vector<float> x(std::size_t(s.NC) * s.H * s.W);
      const float specials[] = {NAN, -INFINITY, INFINITY, -0.0f, 0.0f, -NAN};
      for (auto& v : x) {
        if (kind == 0) v = float(int(rng.below(16))) * 0.37f - 2.0f;  // duplicates, no special values
        if (kind == 1) v = float(int(rng.below(3)) - 1);
        if (kind == 2) v = rng.below(4) == 0 ? specials[rng.below(6)] : float(int(rng.below(5)) - 2);
      }
      const std::size_t no = std::size_t(s.NC) * s.P() * s.Q();
      std::vector<float> dy = random_vec(no, rng), wy(no), wdx(x.size());
      for (std::size_t i = 0; i < no; i += 7) dy[i] = -0.0f;
      std::vector<uint8_t> wam(no);
      ref::maxpool2d_forward(wy.data(), wam.data(), x.data(), s);
      ref::maxpool2d_backward(wdx.data(), dy.data(), wam.data(), s);
      for (const KernelTable* t : tables) {
        std::vector<float> y(no, 42.0f), dx(x.size(), 42.0f);
        std::vector<uint8_t> am(no, 99);
        t->maxpool2d_forward(y.data(), am.data(), x.data(), s);
        EXPECT_EQ(0, std::memcmp(y.data(), wy.data(), no * sizeof(float))) << "out";
        EXPECT_EQ(am, wam);
        t->maxpool2d_backward(dx.data(), dy.data(), wam.data(), s);
        EXPECT_EQ(0, std::memcmp(dx.data(), wdx.data(), dx.size() * sizeof(float))) << "dinp";
      }
    }
}

// PyTorch's semantics on a hand-made window: padding is -inf (an all-negative plane still yields its
// maximum, never 0), the first of equal maxima wins, a NaN wins.
TEST_P(ZooConvTest, MaxPoolPaddingIsMinusInfinity) {
  PoolShape s{1, 2, 2, 3};
  s.stride = 2;
  s.pad = 1;
  ASSERT_EQ(s.P(), 1);
  const float x[4] = {-5.0f, -3.0f, -3.0f, -4.0f};
  float y = 0.0f;
  uint8_t am = 99;
  k().maxpool2d_forward(&y, &am, x, s);
  EXPECT_EQ(y, -3.0f);
  EXPECT_EQ(am, 1 * 3 + 2);  // window position (dy 1, dx 2) = input (0, 1)
  const float xn[4] = {-5.0f, -3.0f, NAN, 7.0f};
  k().maxpool2d_forward(&y, &am, xn, s);
  EXPECT_TRUE(std::isnan(y));
  EXPECT_EQ(am, 2 * 3 + 1);
}

TEST_P(ZooConvTest, GlobalAveragePool) {
  Rng rng(22);
  for (auto [NC, HW] : {std::pair{64 * 512, 1}, std::pair{64 * 320, 4}, std::pair{17 * 5, 16}, std::pair{3 * 7, 49},
                        std::pair{2, 33}, std::pair{1, 196}}) {
    SCOPED_TRACE("NC" + std::to_string(NC) + " HW" + std::to_string(HW));
    auto x = random_vec(std::size_t(NC) * HW, rng), dy = random_vec(std::size_t(NC), rng);
    std::vector<float> y(std::size_t(NC), NAN), dx(x.size(), NAN);
    k().avgpool_global_forward(y.data(), x.data(), NC, HW);
    k().avgpool_global_backward(dx.data(), dy.data(), NC, HW);
    std::vector<double> wy(y.size()), my(y.size()), wdx(dx.size()), mdx(dx.size());
    ref::avgpool_global_forward(wy.data(), to_double(x).data(), NC, HW);
    ref::avgpool_global_forward(my.data(), abs_double(x).data(), NC, HW);
    ref::avgpool_global_backward(wdx.data(), to_double(dy).data(), NC, HW);
    ref::avgpool_global_backward(mdx.data(), abs_double(dy).data(), NC, HW);
    expect_close("out", y, wy, my, HW + 2);  // HW terms, the division
    expect_close("dinp", dx, wdx, mdx, 2);   // one division
  }
}

// The 16-bit fallback tables on grouped and depthwise convs: the same results as the reference run on
// operands rounded to the 16-bit type (lowp.h: every tensor operand rounded, biases and sums fp32), within
// the fp32 summation bound.
TEST_P(ZooConvTest, SixteenBitFallbackOnGroupedConv) {
  const Conv2dShape shapes[] = {conv(17, 18, 9, 9, 26, 3, 2, 1, 2), conv(3, 21, 9, 10, 21, 3, 1, 1, 21),
                                conv(3, 21, 2, 2, 21, 3, 1, 1, 21), conv(5, 19, 2, 1, 19, 3, 2, 1, 19),
                                conv(5, 64, 7, 7, 128, 3, 2, 1), conv(4, 34, 5, 5, 30, 1, 1, 0, 2)};
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    const KernelTable& t = kernels_for(GetParam(), p);  // (non-fused convs: the rounding tables at every level)
    for (const Conv2dShape& s : shapes) {
      SCOPED_TRACE(std::string(precision_name(p)) + " " + conv_name(s));
      const Case& c = reference_case(s, Forward);  // (its operands only)
      const auto rx = rounded(c.x, p), rw = rounded(c.w, p), rdy = rounded(c.dy, p);
      std::vector<double> y(out_size(s)), ym(out_size(s)), dx(in_size(s)), dxm(in_size(s)), dw(w_size(s)),
          dwm(w_size(s)), db(s.K), dbm(s.K);
      ref::conv2d_forward(y.data(), to_double(rx).data(), to_double(rw).data(), to_double(c.b).data(), s);
      ref::conv2d_forward(ym.data(), abs_double(rx).data(), abs_double(rw).data(), abs_double(c.b).data(), s);
      ref::conv2d_backward_data(dx.data(), to_double(rdy).data(), to_double(rw).data(), s);
      ref::conv2d_backward_data(dxm.data(), abs_double(rdy).data(), abs_double(rw).data(), s);
      ref::conv2d_backward_weight(dw.data(), db.data(), to_double(rdy).data(), to_double(rx).data(), s);
      ref::conv2d_backward_weight(dwm.data(), dbm.data(), abs_double(rdy).data(), abs_double(rx).data(), s);
      std::vector<float> gy(out_size(s), NAN), gdx(in_size(s), NAN), gdw(w_size(s), NAN), gdb(s.K, NAN);
      t.conv2d_forward(gy.data(), c.x.data(), c.w.data(), c.b.data(), s);
      t.conv2d_backward_data(gdx.data(), c.dy.data(), c.w.data(), s);
      t.conv2d_backward_weight(gdw.data(), gdb.data(), c.dy.data(), c.x.data(), s);
      expect_close("out", gy, y, ym, s.Cg() * s.R * s.S + 2);
      expect_close("dinp", gdx, dx, dxm, s.Kg() * s.R * s.S + 2);
      expect_close("dweight", gdw, dw, dwm, double(s.N) * s.P() * s.Q() + 2);
      expect_close("dbias", gdb, db, dbm, double(s.N) * s.P() * s.Q() + 2);
    }
  }
}

TEST(ZooConvTables, EveryLevelHasTheZooEntries) {
  for (IsaLevel level : supported_isas()) {
    const KernelTable& t = kernels_for(level);
    EXPECT_TRUE(t.avgpool_global_forward && t.avgpool_global_backward) << isa_name(level);
    for (Precision p : {Precision::Bf16, Precision::Fp16}) {
      const KernelTable& r = rounding_kernels_for(level, p);
      EXPECT_TRUE(r.avgpool_global_forward && r.avgpool_global_backward) << isa_name(level);
    }
  }
  Conv2dShape s = conv(2, 12, 5, 5, 24, 3, 1, 1, 3);
  EXPECT_EQ(s.Cg(), 4);
  EXPECT_EQ(s.Kg(), 8);
  EXPECT_DOUBLE_EQ(s.macs(), 2.0 * 24 * 25 * 4 * 9);
}

std::string isa_param_name(const ::testing::TestParamInfo<IsaLevel>& info) { return isa_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Isa, ZooConvTest, ::testing::ValuesIn(supported_isas()), isa_param_name);

}  // namespace
}  // namespace ringtrain::ops
