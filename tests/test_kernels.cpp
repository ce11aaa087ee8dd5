// Every op x every ISA level this CPU runs x shapes with odd tails, against the reference kernels run
// in double precision (ggml's test-backend-ops, STYLE.md).
//
// Tolerances are derived, not chosen: a float result that sums n products, in any order, with or
// without FMA, is within gamma(n) * sum|terms| of the exact sum, gamma(n) = n u / (1 - n u), u = 2^-24
// (Higham, Accuracy and Stability of Numerical Algorithms, eq. 3.5). sum|terms| is the same reference
// run on |inputs|. n is the op's reduction length plus 2 (the bias add and the final rounding).
// Ops without arithmetic (ReLU, max-pool) must match exactly. The fused conv+ReLU+pool tests use
// small-integer data whose sums are exact in float, so every ISA takes the same pooling decisions,
// ties included, and the forward must match bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "kernel_test_util.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;  // kU, gamma, random and integer data, expect_close (kernel_test_util.h)

void expect_equal(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

std::string conv_name(const Conv2dShape& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "N%d_C%d_%dx%d_K%d_%dx%d_st%d_pad%d", s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride,
                s.pad);
  return buf;
}

Conv2dShape conv(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S, s.stride = stride, s.pad = pad;
  return s;
}

// LeNet's two convolutions at batch 1, 3 and 17, then shapes that take the other code paths:
// 3x3 tiles, a kernel that is neither 3 nor 5 wide, stride 2, widths that are not a multiple of 16.
std::vector<Conv2dShape> conv_shapes() {
  std::vector<Conv2dShape> out;
  for (int N : {1, 3, 17}) {
    out.push_back(conv(N, 1, 28, 28, 6, 5, 5, 1, 2));
    out.push_back(conv(N, 6, 14, 14, 16, 5, 5, 1, 0));
  }
  out.push_back(conv(3, 3, 11, 13, 7, 3, 3, 1, 1));
  out.push_back(conv(2, 4, 7, 19, 3, 2, 4, 1, 0));
  out.push_back(conv(5, 2, 9, 12, 5, 3, 3, 2, 1));
  out.push_back(conv(17, 2, 20, 37, 9, 5, 5, 1, 1));
  return out;
}
// P and Q even: the shapes the fused op accepts.
std::vector<Conv2dShape> fused_shapes() {
  std::vector<Conv2dShape> out;
  for (int N : {1, 3, 17}) {
    out.push_back(conv(N, 1, 28, 28, 6, 5, 5, 1, 2));
    out.push_back(conv(N, 6, 14, 14, 16, 5, 5, 1, 0));
  }
  out.push_back(conv(3, 3, 10, 12, 7, 3, 3, 1, 1));
  out.push_back(conv(2, 2, 11, 11, 5, 3, 3, 2, 1));
  out.push_back(conv(5, 3, 9, 13, 4, 2, 4, 1, 0));
  out.push_back(conv(17, 5, 22, 40, 3, 5, 5, 1, 1));
  return out;
}

// Every level this CPU can run, or only ref and RINGTRAIN_ISA's level when it is set (the sanitizer run
// forces scalar); the others are then skipped, so test names are the same in every environment.
bool level_under_test(IsaLevel level) {
  const char* env = std::getenv("RINGTRAIN_ISA");
  return !(env && *env) || level == IsaLevel::Ref || level == parse_isa(env);
}

class KernelTest : public ::testing::TestWithParam<IsaLevel> {
 protected:
  void SetUp() override {
    if (!level_under_test(GetParam()))
      GTEST_SKIP() << "RINGTRAIN_ISA=" << std::getenv("RINGTRAIN_ISA") << " selects another level";
  }
  const KernelTable& k() { return kernels_for(GetParam()); }
};

TEST_P(KernelTest, Conv2dForward) {
  Rng rng(1);
  for (const Conv2dShape& s : conv_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    auto w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    auto b = random_vec(s.K, rng);
    std::vector<float> out(std::size_t(s.N) * s.K * s.P() * s.Q(), NAN);
    k().conv2d_forward(out.data(), x.data(), w.data(), b.data(), s);
    std::vector<double> want(out.size()), mag(out.size());
    ref::conv2d_forward(want.data(), to_double(x).data(), to_double(w).data(), to_double(b).data(), s);
    ref::conv2d_forward(mag.data(), abs_double(x).data(), abs_double(w).data(), abs_double(b).data(), s);
    expect_close("out", out, want, mag, s.C * s.R * s.S + 2);
  }
}

TEST_P(KernelTest, Conv2dBackwardData) {
  Rng rng(2);
  for (const Conv2dShape& s : conv_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto dy = random_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng);
    auto w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    std::vector<float> dx(std::size_t(s.N) * s.C * s.H * s.W, NAN);
    k().conv2d_backward_data(dx.data(), dy.data(), w.data(), s);
    std::vector<double> want(dx.size()), mag(dx.size());
    ref::conv2d_backward_data(want.data(), to_double(dy).data(), to_double(w).data(), s);
    ref::conv2d_backward_data(mag.data(), abs_double(dy).data(), abs_double(w).data(), s);
    expect_close("dinp", dx, want, mag, s.K * s.R * s.S + 2);
  }
}

TEST_P(KernelTest, Conv2dBackwardWeight) {
  Rng rng(3);
  for (const Conv2dShape& s : conv_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto dy = random_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng);
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    std::vector<float> dw(std::size_t(s.K) * s.C * s.R * s.S, NAN), db(s.K, NAN);
    k().conv2d_backward_weight(dw.data(), db.data(), dy.data(), x.data(), s);
    std::vector<double> want_w(dw.size()), want_b(db.size()), mag_w(dw.size()), mag_b(db.size());
    ref::conv2d_backward_weight(want_w.data(), want_b.data(), to_double(dy).data(), to_double(x).data(), s);
    ref::conv2d_backward_weight(mag_w.data(), mag_b.data(), abs_double(dy).data(), abs_double(x).data(), s);
    const double n = double(s.N) * s.P() * s.Q() + 2;
    expect_close("dweight", dw, want_w, mag_w, n);
    expect_close("dbias", db, want_b, mag_b, n);
  }
}

// The unfused reference composition the fused op must reproduce, in double:
// pre = conv(x) + b; act = relu(pre); out, argmax = maxpool2(act).
struct RefConvReluPool {
  std::vector<double> pre, act, out;
  std::vector<uint8_t> argmax;
  PoolShape pool;
  RefConvReluPool(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                  const Conv2dShape& s) {
    pre.resize(std::size_t(s.N) * s.K * s.P() * s.Q());
    act.resize(pre.size());
    pool = {s.N * s.K, s.P(), s.Q(), 2};
    out.resize(std::size_t(pool.NC) * pool.P() * pool.Q());
    argmax.resize(out.size());
    ref::conv2d_forward(pre.data(), x.data(), w.data(), b.data(), s);
    ref::relu_forward(act.data(), pre.data(), int64_t(pre.size()));
    ref::maxpool2d_forward(out.data(), argmax.data(), act.data(), pool);
  }
  // dout -> (dinp, dweight, dbias) through pool, relu and conv backward; abs_* for magnitudes.
  void backward(std::vector<double>& dx, std::vector<double>& dw, std::vector<double>& db, const std::vector<double>& dy,
                const std::vector<double>& x, const std::vector<double>& w, const Conv2dShape& s) const {
    std::vector<double> dact(pre.size()), dpre(pre.size());
    ref::maxpool2d_backward(dact.data(), dy.data(), argmax.data(), pool);
    ref::relu_backward(dpre.data(), dact.data(), act.data(), int64_t(pre.size()));
    dx.resize(x.size());
    dw.resize(w.size());
    db.resize(s.K);
    ref::conv2d_backward_data(dx.data(), dpre.data(), w.data(), s);
    ref::conv2d_backward_weight(dw.data(), db.data(), dpre.data(), x.data(), s);
  }
};

TEST_P(KernelTest, Conv2dReluPoolForwardBackward) {
  if (!k().conv2d_relu_pool_forward) GTEST_SKIP() << "no fused kernel at this level (the layer composes)";
  Rng rng(4);
  for (const Conv2dShape& s : fused_shapes()) {
    SCOPED_TRACE(conv_name(s));
    ASSERT_TRUE(conv_relu_pool_fusable(s));
    // Integers in [-3,3] times weights in eighths: every sum is exact, so ties and zeros are shared.
    auto x = integer_vec(std::size_t(s.N) * s.C * s.H * s.W, rng, 3, 1.0f);
    auto w = integer_vec(std::size_t(s.K) * s.C * s.R * s.S, rng, 4, 0.125f);
    auto b = integer_vec(s.K, rng, 4, 0.125f);
    std::vector<float> saved(k().conv2d_relu_pool_saved(s), NAN);
    RefConvReluPool want(to_double(x), to_double(w), to_double(b), s);
    std::vector<float> out(want.out.size(), NAN);
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), s);
    expect_equal("out", out, std::vector<float>(want.out.begin(), want.out.end()));

    auto dy = random_vec(out.size(), rng);
    std::vector<float> dx(x.size(), NAN), dw(w.size(), NAN), db(b.size(), NAN);
    k().conv2d_relu_pool_backward(dx.data(), dw.data(), db.data(), dy.data(), saved.data(), x.data(), w.data(), s);
    std::vector<double> wdx, wdw, wdb, mdx, mdw, mdb;
    want.backward(wdx, wdw, wdb, to_double(dy), to_double(x), to_double(w), s);
    want.backward(mdx, mdw, mdb, abs_double(dy), abs_double(x), abs_double(w), s);
    expect_close("dinp", dx, wdx, mdx, s.K * s.R * s.S + 2);
    expect_close("dweight", dw, wdw, mdw, double(s.N) * s.P() * s.Q() + 2);
    expect_close("dbias", db, wdb, mdb, double(s.N) * s.P() * s.Q() + 2);
    // Without dinp (the first layer) the weight gradients are the same.
    std::vector<float> dw2(w.size(), NAN), db2(b.size(), NAN);
    k().conv2d_relu_pool_backward(nullptr, dw2.data(), db2.data(), dy.data(), saved.data(), x.data(), w.data(), s);
    expect_equal("dweight without dinp", dw2, dw);
    expect_equal("dbias without dinp", db2, db);
  }
}

// [N][F] <-> [N/B][F][B], B samples a block (conv_pool.h: blocked activations).
std::vector<float> to_blocks(const std::vector<float>& v, int N, int B) {
  const std::size_t F = v.size() / N;
  std::vector<float> out(v.size());
  for (int n = 0; n < N; ++n)
    for (std::size_t f = 0; f < F; ++f) out[(std::size_t(n / B) * F + f) * B + n % B] = v[std::size_t(n) * F + f];
  return out;
}
std::vector<float> from_blocks(const std::vector<float>& v, int N, int B) {
  const std::size_t F = v.size() / N;
  std::vector<float> out(v.size());
  for (int n = 0; n < N; ++n)
    for (std::size_t f = 0; f < F; ++f) out[std::size_t(n) * F + f] = v[(std::size_t(n / B) * F + f) * B + n % B];
  return out;
}

// A table that takes blocked fp32 activations gives the same bits with them as without, for every
// combination of blocked input and output: padded and unpadded inputs (an unpadded one is read in place by
// both passes, its gradient written straight into the blocked tensor; a padded one goes through the kernel's
// padded block), one and several channels, the tiled and the any-stride code; a batch that is not whole
// blocks is refused.
TEST_P(KernelTest, Conv2dReluPoolBlockedActivationsSameBits) {
  if (!k().conv2d_relu_pool_blocked) GTEST_SKIP() << "this table takes no blocked activations";
  const int B = k().conv2d_relu_pool_block;
  ASSERT_GE(B, 1);
  Rng rng(14);
  for (Conv2dShape base : {conv(2, 1, 28, 28, 6, 5, 5, 1, 2), conv(2, 6, 14, 14, 16, 5, 5, 1, 0),
                           conv(3, 4, 10, 12, 5, 3, 3, 1, 1), conv(1, 3, 9, 13, 4, 2, 4, 1, 0),
                           conv(2, 2, 11, 11, 5, 3, 3, 2, 1)}) {
    base.N *= B;  // whole blocks
    SCOPED_TRACE(conv_name(base));
    ASSERT_TRUE(k().conv2d_relu_pool_blocked(base));
    if (B > 1) {
      Conv2dShape part = base;
      part.N = base.N + 1;
      EXPECT_FALSE(k().conv2d_relu_pool_blocked(part)) << "a partial block cannot be blocked";
      part.in_blocked = true;
      std::vector<float> x(std::size_t(part.N) * part.C * part.H * part.W);
      std::vector<float> w(std::size_t(part.K) * part.C * part.R * part.S);
      std::vector<float> out(std::size_t(part.N) * part.K * (part.P() / 2) * (part.Q() / 2));
      std::vector<float> saved(k().conv2d_relu_pool_saved(part)), b(part.K);
      EXPECT_THROW(k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), part), Error);
    }
    const int N = base.N;
    auto x = random_vec(std::size_t(N) * base.C * base.H * base.W, rng);
    auto w = random_vec(std::size_t(base.K) * base.C * base.R * base.S, rng);
    auto b = random_vec(base.K, rng);
    const std::size_t outn = std::size_t(N) * base.K * (base.P() / 2) * (base.Q() / 2);
    auto dy = random_vec(outn, rng);
    std::vector<float> saved(k().conv2d_relu_pool_saved(base));
    std::vector<float> out(outn), dx(x.size()), dw(w.size()), db(b.size());
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), base);
    k().conv2d_relu_pool_backward(dx.data(), dw.data(), db.data(), dy.data(), saved.data(), x.data(), w.data(), base);
    for (int mode = 1; mode < 4; ++mode) {
      Conv2dShape s = base;
      s.in_blocked = mode & 1, s.out_blocked = mode & 2;
      SCOPED_TRACE(mode);
      const auto xin = s.in_blocked ? to_blocks(x, N, B) : x;
      const auto dyin = s.out_blocked ? to_blocks(dy, N, B) : dy;
      std::vector<float> out2(outn, NAN), dx2(x.size(), NAN), dw2(w.size(), NAN), db2(b.size(), NAN);
      std::vector<float> saved2(saved.size(), NAN);
      k().conv2d_relu_pool_forward(out2.data(), saved2.data(), xin.data(), w.data(), b.data(), s);
      k().conv2d_relu_pool_backward(dx2.data(), dw2.data(), db2.data(), dyin.data(), saved2.data(), xin.data(),
                                    w.data(), s);
      if (s.in_blocked && s.pad == 0)  // the input is the kernel's layout already: read in place, not kept
        EXPECT_LT(k().conv2d_relu_pool_saved(s), saved.size());
      EXPECT_EQ(0, std::memcmp((s.out_blocked ? from_blocks(out2, N, B) : out2).data(), out.data(), outn * 4)) << "out";
      EXPECT_EQ(0, std::memcmp((s.in_blocked ? from_blocks(dx2, N, B) : dx2).data(), dx.data(), dx.size() * 4))
          << "dinp";
      EXPECT_EQ(0, std::memcmp(dw2.data(), dw.data(), dw.size() * 4)) << "dweight";
      EXPECT_EQ(0, std::memcmp(db2.data(), db.data(), db.size() * 4)) << "dbias";
    }
  }
}

// Random (non-integer) data: the fused forward value is within the conv bound of the reference
// (max and ReLU do not amplify errors), whatever pooling decision a near-tie takes.
TEST_P(KernelTest, Conv2dReluPoolForwardRandom) {
  if (!k().conv2d_relu_pool_forward) GTEST_SKIP() << "no fused kernel at this level";
  Rng rng(5);
  for (const Conv2dShape& s : fused_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    auto w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    auto b = random_vec(s.K, rng);
    std::vector<float> saved(k().conv2d_relu_pool_saved(s));
    RefConvReluPool want(to_double(x), to_double(w), to_double(b), s);
    RefConvReluPool mag(abs_double(x), abs_double(w), abs_double(b), s);  // max of |terms| sums per window
    std::vector<float> out(want.out.size(), NAN);
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), s);
    expect_close("out", out, want.out, mag.out, s.C * s.R * s.S + 2);
  }
}

TEST_P(KernelTest, LinearForwardBackward) {
  Rng rng(6);
  const LinearShape shapes[] = {{1, 400, 120}, {3, 120, 84}, {17, 84, 10}, {5, 37, 53}, {64, 400, 120}, {2, 1, 1},
                                {33, 17, 49}};
  for (const LinearShape& s : shapes) {
    SCOPED_TRACE("N" + std::to_string(s.N) + "_I" + std::to_string(s.I) + "_O" + std::to_string(s.O));
    auto x = random_vec(std::size_t(s.N) * s.I, rng);
    auto w = random_vec(std::size_t(s.O) * s.I, rng);
    auto b = random_vec(s.O, rng);
    auto dy = random_vec(std::size_t(s.N) * s.O, rng);
    std::vector<float> y(std::size_t(s.N) * s.O, NAN), dx(x.size(), NAN), dw(w.size(), NAN), db(b.size(), NAN);
    k().linear_forward(y.data(), x.data(), w.data(), b.data(), s);
    k().linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), s);
    std::vector<double> wy(y.size()), my(y.size()), wdx(dx.size()), mdx(dx.size()), wdw(dw.size()), mdw(dw.size()),
        wdb(db.size()), mdb(db.size());
    ref::linear_forward(wy.data(), to_double(x).data(), to_double(w).data(), to_double(b).data(), s);
    ref::linear_forward(my.data(), abs_double(x).data(), abs_double(w).data(), abs_double(b).data(), s);
    ref::linear_backward(wdx.data(), wdw.data(), wdb.data(), to_double(dy).data(), to_double(x).data(),
                         to_double(w).data(), s);
    ref::linear_backward(mdx.data(), mdw.data(), mdb.data(), abs_double(dy).data(), abs_double(x).data(),
                         abs_double(w).data(), s);
    expect_close("out", y, wy, my, s.I + 2);
    expect_close("dinp", dx, wdx, mdx, s.O + 2);
    expect_close("dweight", dw, wdw, mdw, s.N + 2);
    expect_close("dbias", db, wdb, mdb, s.N + 2);
    // dinp may be null (first layer).
    std::vector<float> dw2(w.size(), NAN), db2(b.size(), NAN);
    k().linear_backward(nullptr, dw2.data(), db2.data(), dy.data(), x.data(), w.data(), s);
    expect_equal("dweight without dinp", dw2, dw);
  }
}

TEST_P(KernelTest, ReluExact) {
  Rng rng(7);
  for (int64_t n : {1, 15, 17, 1003}) {
    auto x = random_vec(n, rng);
    x[0] = 0.0f;
    if (n > 1) x[1] = -0.0f;
    auto dy = random_vec(n, rng);
    std::vector<float> y(n, NAN), dx(n, NAN), wy(n), wdx(n);
    k().relu_forward(y.data(), x.data(), n);
    k().relu_backward(dx.data(), dy.data(), y.data(), n);
    ref::relu_forward(wy.data(), x.data(), n);
    ref::relu_backward(wdx.data(), dy.data(), wy.data(), n);
    expect_equal("out", y, wy);
    expect_equal("dinp", dx, wdx);
  }
}

TEST_P(KernelTest, MaxPoolExact) {
  Rng rng(8);
  auto strided = [](int NC, int H, int W, int k, int st, int pad) {
    PoolShape s{NC, H, W, k};
    s.stride = st;
    s.pad = pad;
    return s;
  };
  // LeNet's 2x2 and non-overlapping windows, then the vectorised kernels' strided / padded ones (issue 14; more
  // in test_zoo_conv_kernels.cpp): the ResNet stem's at batch 4, plane counts that fill no vector, stride 1.
  const PoolShape shapes[] = {{3, 6, 7, 2},
                              {17, 28, 28, 2},
                              {2, 9, 10, 3},
                              {1, 2, 2, 2},
                              strided(4 * 64, 14, 14, 3, 2, 1),
                              strided(19, 13, 11, 3, 2, 1),
                              strided(7, 9, 8, 2, 1, 1),
                              strided(5, 10, 9, 3, 1, 0)};
  for (const PoolShape& s : shapes) {
    // Integer data: plenty of ties, which must go to the first maximum.
    auto x = integer_vec(std::size_t(s.NC) * s.H * s.W, rng, 2, 1.0f);
    const std::size_t no = std::size_t(s.NC) * s.P() * s.Q();
    auto dy = random_vec(no, rng);
    std::vector<float> y(no, NAN), wy(no), dx(x.size(), NAN), wdx(x.size());
    std::vector<uint8_t> am(no), wam(no);
    k().maxpool2d_forward(y.data(), am.data(), x.data(), s);
    ref::maxpool2d_forward(wy.data(), wam.data(), x.data(), s);
    expect_equal("out", y, wy);
    EXPECT_EQ(am, wam);
    k().maxpool2d_backward(dx.data(), dy.data(), am.data(), s);
    ref::maxpool2d_backward(wdx.data(), dy.data(), wam.data(), s);
    expect_equal("dinp", dx, wdx);
  }
}

TEST_P(KernelTest, SoftmaxCrossEntropy) {
  Rng rng(9);
  for (auto [N, K] : {std::pair{1, 3}, std::pair{17, 10}, std::pair{64, 10}}) {
    auto logits = random_vec(std::size_t(N) * K, rng, -8.0f, 8.0f);
    std::vector<uint8_t> labels(N);
    for (auto& l : labels) l = uint8_t(rng.below(K));
    std::vector<float> probs(logits.size(), NAN), dl(logits.size(), NAN);
    const float loss = k().softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K);
    k().softmax_xent_backward(dl.data(), probs.data(), labels.data(), N, K, 1.0f / N);
    std::vector<double> wp(probs.size()), wdl(dl.size());
    const double wloss = ref::softmax_xent_forward(wp.data(), to_double(logits).data(), labels.data(), N, K);
    ref::softmax_xent_backward(wdl.data(), wp.data(), labels.data(), N, K, 1.0 / N);
    // Each probability: K exps (1 ulp each in libm), a K-term sum and a division: gamma(K + 3) relative.
    std::vector<double> mag_p(wp), mag_dl(wdl.size());
    for (std::size_t i = 0; i < wdl.size(); ++i) mag_dl[i] = (wp[i] + 1.0) / N;
    expect_close("probs", probs, wp, mag_p, K + 3);
    expect_close("dlogits", dl, wdl, mag_dl, K + 5);
    // Loss: per row |x_y - max| + |log sum| carries gamma(K + 3); the mean adds N roundings of the total.
    double mag_loss = 0.0;
    for (int n = 0; n < N; ++n) mag_loss += 2.0 * std::fabs(wloss) + 16.0 + std::log(double(K));
    EXPECT_NEAR(loss, wloss, gamma(K + N + 3) * mag_loss / N + kU * std::fabs(wloss));
  }
}

// The Adam op must reproduce optim::Adam (torch's arithmetic) bit for bit at every level.
TEST_P(KernelTest, AdamStepBitIdenticalToOptimizer) {
  Rng rng(10);
  for (float wd : {0.0f, 0.01f}) {
    for (std::size_t n : {std::size_t(1), std::size_t(17), std::size_t(61706)}) {
      auto p0 = random_vec(n, rng), g0 = random_vec(n, rng);
      optim::AdamOptions opt;
      opt.weight_decay = wd;
      optim::Adam adam(n, opt);
      std::vector<float> want(p0), got(p0), m(n, 0.0f), v(n, 0.0f);
      for (int t = 1; t <= 3; ++t) {
        std::vector<float> g(g0);
        for (auto& x : g) x *= float(t);
        adam.step(want.data(), g.data());
        // The per-step constants exactly as optim::Adam computes them (double, then float).
        const double bc1 = 1.0 - std::pow(double(opt.beta1), double(t));
        const double bc2 = 1.0 - std::pow(double(opt.beta2), double(t));
        const AdamStep a{opt.beta1, opt.beta2, opt.eps, wd, float(double(opt.lr) / bc1), float(std::sqrt(bc2))};
        k().adam_step(got.data(), g.data(), m.data(), v.data(), n, a);
      }
      expect_equal("params", got, want);
      auto state = adam.state();
      expect_equal("exp_avg", m, std::vector<float>(state[0].data, state[0].data + n));
      expect_equal("exp_avg_sq", v, std::vector<float>(state[1].data, state[1].data + n));
    }
  }
}

TEST(KernelDispatch, TablesAreCompleteAndDistinct) {
  for (IsaLevel level : supported_isas()) {
    const KernelTable& t = kernels_for(level);
    EXPECT_EQ(t.level, level);
    EXPECT_TRUE(t.conv2d_forward && t.conv2d_backward_data && t.conv2d_backward_weight && t.maxpool2d_forward &&
                t.maxpool2d_backward && t.relu_forward && t.relu_backward && t.linear_forward && t.linear_backward &&
                t.softmax_xent_forward && t.softmax_xent_backward && t.adam_step)
        << isa_name(level);
    if (level != IsaLevel::Ref) {
      EXPECT_NE(t.conv2d_forward, reference_kernels().conv2d_forward) << isa_name(level);
      EXPECT_TRUE(t.conv2d_relu_pool_forward && t.conv2d_relu_pool_backward && t.conv2d_relu_pool_saved);
    }
  }
  EXPECT_EQ(parse_isa("avx2"), IsaLevel::Avx2);
  EXPECT_THROW(parse_isa("sse9"), Error);
}

std::string isa_param_name(const ::testing::TestParamInfo<IsaLevel>& info) { return isa_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Isa, KernelTest, ::testing::ValuesIn(supported_isas()), isa_param_name);

}  // namespace
}  // namespace ringtrain::ops
