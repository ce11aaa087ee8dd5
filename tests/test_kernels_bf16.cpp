// The 16-bit kernel tables (ops/lowp.h) - the vdpbf16ps kernels, the rounding fallback at every ISA level,
// fp16 - against the reference kernels run in double precision.
//
// Bounds, derived (Higham, eq. 3.5, as tests/test_kernels.cpp): a 16-bit table rounds each tensor operand
// (activation, incoming gradient, weight; not the bias) to nearest, relative error <= u_h = 2^-p for p
// significant bits counting the implicit one (bf16: p = 8, u_h = 2^-8 - not 2^-9: 7 stored bits + 1;
// fp16: p = 11, u_h = 2^-11); the product of two rounded operands is then
// within (2 u_h + u_h^2) |a b| of the exact product, and is itself exact in fp32 (8+8 or 11+11 significant
// bits < 24). The fp32 sum of n such terms, in any order, is within gamma(n) sum|terms|,
// gamma(n) = n u / (1 - n u), u = 2^-24. So against the exact result on the unrounded operands:
//   |got - want| <= (2 u_h + u_h^2) M + gamma(n) M' + u |want|
// with M = the same reference on |operands| and M' the same on |rounded operands| (<= (1 + u_h)^2 M), n the
// reduction length plus 2 (bias add, final rounding). Against the exact result on the rounded operands
// (the reference twin) only gamma(n) M' + u |want| remains: that tight check catches a missing or doubled
// term, which the loose one could hide. ReLU and max-pool are 1-Lipschitz in the max norm, so a pooled
// output is within the largest bound of its window. Integer data (integers in [-3,3], weights in eighths)
// is exact in bf16 and fp16 and its sums are exact in fp32, so there the forward must match bit for bit
// and pooling decisions are shared, which lets the fused backward be compared element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

#include "kernel_test_util.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;

double unit_roundoff(Precision p) { return p == Precision::Bf16 ? 1.0 / 256.0 : 1.0 / 2048.0; }

Conv2dShape conv(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S, s.stride = stride, s.pad = pad;
  return s;
}
std::string conv_name(const Conv2dShape& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "N%d_C%d_%dx%d_K%d_%dx%d_st%d_pad%d", s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad);
  return buf;
}
// LeNet's convolutions at batch 1, 3, 17, 33 (odd blocks of 16), odd and even channel counts (C even:
// the forward pairs channels, else columns; K odd: the backward-data channel pairs get a zero partner),
// 3x3 tiles, one input channel with other K, R, S and column tails, and shapes the bf16 tiles do not cover
// (stride 2, a 4-wide kernel) that take the rounding fallback.
std::vector<Conv2dShape> fused_shapes() {
  std::vector<Conv2dShape> out;
  for (int N : {1, 3, 17, 33}) {
    out.push_back(conv(N, 1, 28, 28, 6, 5, 5, 1, 2));
    out.push_back(conv(N, 6, 14, 14, 16, 5, 5, 1, 0));
  }
  // One input channel (the forward's kernel-row pairs): odd K, a 2-wide column tail, R != S, even R.
  out.push_back(conv(3, 1, 12, 10, 5, 3, 3, 1, 1));
  out.push_back(conv(17, 1, 10, 12, 4, 5, 3, 1, 1));
  out.push_back(conv(2, 1, 8, 14, 7, 3, 5, 1, 1));
  out.push_back(conv(5, 1, 9, 10, 2, 4, 3, 1, 1));
  out.push_back(conv(3, 3, 10, 12, 7, 3, 3, 1, 1));
  out.push_back(conv(3, 4, 10, 12, 5, 3, 3, 1, 1));  // even C: the forward's channel pairs, 3x3
  out.push_back(conv(17, 5, 22, 40, 3, 5, 5, 1, 1));
  out.push_back(conv(2, 2, 11, 11, 5, 3, 3, 2, 1));
  out.push_back(conv(5, 3, 9, 13, 4, 2, 4, 1, 0));
  return out;
}

// conv -> ReLU -> 2x2 max-pool in double, with what the backward needs.
struct RefConvReluPool {
  std::vector<double> pre, act, out;
  std::vector<uint8_t> argmax;
  PoolShape pool;
  RefConvReluPool(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                  const Conv2dShape& s) {
    pre.resize(std::size_t(s.N) * s.K * s.P() * s.Q());
    act.resize(pre.size());
    ref::conv2d_forward(pre.data(), x.data(), w.data(), b.data(), s);
    ref::relu_forward(act.data(), pre.data(), int64_t(pre.size()));
    pool = {s.N * s.K, s.P(), s.Q(), 2};
    out.resize(pre.size() / 4);
    argmax.resize(out.size());
    ref::maxpool2d_forward(out.data(), argmax.data(), act.data(), pool);
  }
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

using Param = std::tuple<IsaLevel, Precision>;
class LowpKernelTest : public LevelTest<Param> {
 protected:
  IsaLevel level() const { return std::get<0>(GetParam()); }
  Precision prec() const { return std::get<1>(GetParam()); }
  const KernelTable& k() { return kernels_for(level(), prec()); }
  double uh() const { return unit_roundoff(prec()); }
};

TEST_P(LowpKernelTest, FusedConvIntegerDataExactForwardAndBoundedBackward) {
  if (!k().conv2d_relu_pool_forward) GTEST_SKIP() << "no fused kernel at this level (the layer composes)";
  Rng rng(11);
  for (const Conv2dShape& s : fused_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto x = integer_vec(std::size_t(s.N) * s.C * s.H * s.W, rng, 3, 1.0f);
    auto w = integer_vec(std::size_t(s.K) * s.C * s.R * s.S, rng, 4, 0.125f);
    auto b = integer_vec(s.K, rng, 4, 0.125f);
    std::vector<float> saved(k().conv2d_relu_pool_saved(s), NAN);
    RefConvReluPool want(to_double(x), to_double(w), to_double(b), s);
    std::vector<float> out(want.out.size(), NAN);
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), s);
    int bad = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!(double(out[i]) == want.out[i]) && bad++ < 5)
        ADD_FAILURE() << "out[" << i << "]: got " << out[i] << ", want " << want.out[i];
    ASSERT_EQ(bad, 0) << "integer data must give the exact forward";

    auto dy = random_vec(out.size(), rng);
    const auto dyr = rounded(dy, prec());
    std::vector<float> dx(x.size(), NAN), dw(w.size(), NAN), db(b.size(), NAN);
    k().conv2d_relu_pool_backward(dx.data(), dw.data(), db.data(), dy.data(), saved.data(), x.data(), w.data(), s);
    std::vector<double> tdx, tdw, tdb, rdx, rdw, rdb, mdx, mdw, mdb;
    want.backward(tdx, tdw, tdb, to_double(dyr), to_double(x), to_double(w), s);  // the twin: dy rounded
    want.backward(rdx, rdw, rdb, to_double(dy), to_double(x), to_double(w), s);   // fp32 semantics
    want.backward(mdx, mdw, mdb, abs_double(dy), abs_double(x), abs_double(w), s);
    const double nd = s.K * s.R * s.S + 2, nw = double(s.N) * s.P() * s.Q() + 2;
    const double r1 = uh() * (1 + uh());  // only dy is rounded here (x, w are exact)
    expect_within("dinp vs twin", dx, tdx, mdx, 0.0, mdx, gamma(nd));
    expect_within("dweight vs twin", dw, tdw, mdw, 0.0, mdw, gamma(nw));
    expect_within("dbias vs twin", db, tdb, mdb, 0.0, mdb, gamma(nw));
    expect_within("dinp vs fp32", dx, rdx, mdx, r1, mdx, gamma(nd));
    expect_within("dweight vs fp32", dw, rdw, mdw, r1, mdw, gamma(nw));
    expect_within("dbias vs fp32", db, rdb, mdb, r1, mdb, gamma(nw));
    std::vector<float> dw2(w.size(), NAN), db2(b.size(), NAN);
    k().conv2d_relu_pool_backward(nullptr, dw2.data(), db2.data(), dy.data(), saved.data(), x.data(), w.data(), s);
    EXPECT_EQ(0, std::memcmp(dw2.data(), dw.data(), dw.size() * 4)) << "dweight without dinp differs";
    EXPECT_EQ(0, std::memcmp(db2.data(), db.data(), db.size() * 4)) << "dbias without dinp differs";
  }
}

TEST_P(LowpKernelTest, FusedConvRandomForwardWithinRoundingBound) {
  if (!k().conv2d_relu_pool_forward) GTEST_SKIP() << "no fused kernel at this level";
  Rng rng(12);
  for (const Conv2dShape& s : fused_shapes()) {
    SCOPED_TRACE(conv_name(s));
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    auto w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    auto b = random_vec(s.K, rng);
    std::vector<float> saved(k().conv2d_relu_pool_saved(s));
    const auto xr = rounded(x, prec()), wr = rounded(w, prec());
    RefConvReluPool want(to_double(x), to_double(w), to_double(b), s);
    RefConvReluPool twin(to_double(xr), to_double(wr), to_double(b), s);
    RefConvReluPool mag(abs_double(x), abs_double(w), abs_double(b), s);
    RefConvReluPool magr(abs_double(xr), abs_double(wr), abs_double(b), s);
    std::vector<float> out(want.out.size(), NAN);
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), s);
    const double n = s.C * s.R * s.S + 2;
    expect_within("out vs twin", out, twin.out, mag.out, 0.0, magr.out, gamma(n));
    expect_within("out vs fp32", out, want.out, mag.out, 2 * uh() + uh() * uh(), magr.out, gamma(n));
  }
}

// Where a table's fused conv is the fp32 kernels rounding operands as they copy them (bf16 at level avx2), it
// gives the composition's bits - rounding whole tensors first, then the same fp32 kernels - on random data:
// the input, weight and incoming gradient each rounded once, in both passes (dweight without dinp included).
TEST_P(LowpKernelTest, FusedConvRoundingInTheCopiesSameBitsAsTheComposition) {
  const KernelTable& composition = rounding_kernels_for(level(), prec());
  if (!k().conv2d_relu_pool_forward || k().conv2d_relu_pool_forward == composition.conv2d_relu_pool_forward ||
      k().conv2d_relu_pool_block_bf16)
    GTEST_SKIP() << "this table's fused conv is the composition, or 16-bit dot products (other sums)";
  Rng rng(14);
  for (const Conv2dShape& s : fused_shapes()) {
    SCOPED_TRACE(conv_name(s));
    const auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng);
    const auto w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    const auto b = random_vec(s.K, rng);
    const std::size_t outn = std::size_t(s.N) * s.K * (s.P() / 2) * (s.Q() / 2);
    const auto dy = random_vec(outn, rng);
    struct Run {
      std::vector<float> out, dx, dw, db, dw2, db2;
    };
    const auto run = [&](const KernelTable& t) {
      Run r{std::vector<float>(outn, NAN), std::vector<float>(x.size(), NAN), std::vector<float>(w.size(), NAN),
            std::vector<float>(b.size(), NAN), std::vector<float>(w.size(), NAN), std::vector<float>(b.size(), NAN)};
      std::vector<float> saved(t.conv2d_relu_pool_saved(s), NAN);
      t.conv2d_relu_pool_forward(r.out.data(), saved.data(), x.data(), w.data(), b.data(), s);
      t.conv2d_relu_pool_backward(r.dx.data(), r.dw.data(), r.db.data(), dy.data(), saved.data(), x.data(), w.data(), s);
      t.conv2d_relu_pool_backward(nullptr, r.dw2.data(), r.db2.data(), dy.data(), saved.data(), x.data(), w.data(), s);
      return r;
    };
    const Run got = run(k()), want = run(composition);
    EXPECT_EQ(0, std::memcmp(got.out.data(), want.out.data(), outn * 4)) << "out";
    EXPECT_EQ(0, std::memcmp(got.dx.data(), want.dx.data(), x.size() * 4)) << "dinp";
    EXPECT_EQ(0, std::memcmp(got.dw.data(), want.dw.data(), w.size() * 4)) << "dweight";
    EXPECT_EQ(0, std::memcmp(got.db.data(), want.db.data(), b.size() * 4)) << "dbias";
    EXPECT_EQ(0, std::memcmp(got.dw2.data(), want.dw.data(), w.size() * 4)) << "dweight without dinp";
    EXPECT_EQ(0, std::memcmp(got.db2.data(), want.db.data(), b.size() * 4)) << "dbias without dinp";
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

// bf16 words <-> float buffers (a blocked tensor's 16-bit values fill the first half of its float buffer).
std::vector<float> pack_bf16(const std::vector<float>& v) {
  std::vector<float> out((v.size() + 1) / 2, 0.0f);
  std::vector<uint16_t> h(v.size());
  float_to_bf16(h.data(), v.data(), v.size());
  std::memcpy(out.data(), h.data(), h.size() * 2);
  return out;
}
std::vector<float> unpack_bf16(const std::vector<float>& buf, std::size_t n) {
  std::vector<uint16_t> h(n);
  std::memcpy(h.data(), buf.data(), n * 2);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(h[i]);
  return out;
}

// A table that takes blocked activations ([N/B][F][B]: bf16 words at avx512, bf16 values in fp32 at avx2) gives
// the same parameter gradients and outputs with them as without, and the blocked tensors hold the bf16 rounding
// of the fp32 ones, for every combination of blocked input and output (padded and unpadded inputs, one and
// several channels). The blocked tensors given it hold bf16 values, as its own kernels write them.
TEST_P(LowpKernelTest, FusedConvBlockedActivationsSameBits) {
  if (!k().conv2d_relu_pool_blocked) GTEST_SKIP() << "this table takes no blocked activations";
  const int B = k().conv2d_relu_pool_block;
  const bool words = k().conv2d_relu_pool_block_bf16;
  // A blocked tensor as the table holds it, and back.
  const auto block = [&](const std::vector<float>& v, int N) { return words ? pack_bf16(to_blocks(v, N, B)) : to_blocks(v, N, B); };
  const auto unblock = [&](const std::vector<float>& v, std::size_t n, int N) {
    return from_blocks(words ? unpack_bf16(v, n) : std::vector<float>(v.begin(), v.begin() + std::ptrdiff_t(n)), N, B);
  };
  Rng rng(13);
  for (const Conv2dShape& base : {conv(32, 1, 28, 28, 6, 5, 5, 1, 2), conv(16, 6, 14, 14, 16, 5, 5, 1, 0),
                                  conv(16, 4, 10, 12, 5, 3, 3, 1, 1), conv(16, 3, 10, 12, 7, 3, 3, 1, 1)}) {
    SCOPED_TRACE(conv_name(base));
    ASSERT_TRUE(k().conv2d_relu_pool_blocked(base));
    Conv2dShape odd = base;
    odd.N = 17;
    EXPECT_FALSE(k().conv2d_relu_pool_blocked(odd)) << "a partial block cannot be blocked";
    const int N = base.N;
    // A blocked input is bf16: give the unblocked run the same (bf16-exact) values.
    auto x = rounded(random_vec(std::size_t(N) * base.C * base.H * base.W, rng), Precision::Bf16);
    auto w = random_vec(std::size_t(base.K) * base.C * base.R * base.S, rng);
    auto b = random_vec(base.K, rng);
    const std::size_t outn = std::size_t(N) * base.K * (base.P() / 2) * (base.Q() / 2);
    auto dy = rounded(random_vec(outn, rng), Precision::Bf16);
    std::vector<float> saved(k().conv2d_relu_pool_saved(base));
    std::vector<float> out(outn), dx(x.size()), dw(w.size()), db(b.size());
    k().conv2d_relu_pool_forward(out.data(), saved.data(), x.data(), w.data(), b.data(), base);
    k().conv2d_relu_pool_backward(dx.data(), dw.data(), db.data(), dy.data(), saved.data(), x.data(), w.data(), base);
    const auto out16 = rounded(out, Precision::Bf16), dx16 = rounded(dx, Precision::Bf16);
    for (int mode = 1; mode < 4; ++mode) {
      Conv2dShape s = base;
      s.in_blocked = mode & 1, s.out_blocked = mode & 2;
      SCOPED_TRACE(mode);
      const auto xin = s.in_blocked ? block(x, N) : x;
      const auto dyin = s.out_blocked ? block(dy, N) : dy;
      std::vector<float> out2(outn, NAN), dx2(x.size(), NAN), dw2(w.size(), NAN), db2(b.size(), NAN);
      std::vector<float> saved2(saved.size(), NAN);
      k().conv2d_relu_pool_forward(out2.data(), saved2.data(), xin.data(), w.data(), b.data(), s);
      k().conv2d_relu_pool_backward(dx2.data(), dw2.data(), db2.data(), dyin.data(), saved2.data(), xin.data(), w.data(), s);
      if (s.out_blocked)
        EXPECT_EQ(0, std::memcmp(unblock(out2, outn, N).data(), out16.data(), outn * 4)) << "out (bf16)";
      else
        EXPECT_EQ(0, std::memcmp(out2.data(), out.data(), outn * 4)) << "out";
      if (s.in_blocked)
        EXPECT_EQ(0, std::memcmp(unblock(dx2, dx.size(), N).data(), dx16.data(), dx.size() * 4))
            << "dinp (bf16)";
      else
        EXPECT_EQ(0, std::memcmp(dx2.data(), dx.data(), dx.size() * 4)) << "dinp";
      EXPECT_EQ(0, std::memcmp(dw2.data(), dw.data(), dw.size() * 4)) << "dweight";
      EXPECT_EQ(0, std::memcmp(db2.data(), db.data(), db.size() * 4)) << "dbias";
    }
  }
}

TEST_P(LowpKernelTest, LinearWithinRoundingBound) {
  Rng rng(13);
  for (auto [N, I, O] : {std::tuple{1, 400, 120}, {3, 120, 84}, {17, 84, 10}, {33, 7, 5}, {64, 400, 120}, {2, 1, 1},
                         {16, 33, 49}}) {
    SCOPED_TRACE("N" + std::to_string(N) + "_I" + std::to_string(I) + "_O" + std::to_string(O));
    const LinearShape s{N, I, O};
    auto x = random_vec(std::size_t(N) * I, rng), w = random_vec(std::size_t(O) * I, rng), b = random_vec(O, rng);
    auto dy = random_vec(std::size_t(N) * O, rng);
    const auto xr = rounded(x, prec()), wr = rounded(w, prec()), dyr = rounded(dy, prec());
    std::vector<float> out(std::size_t(N) * O, NAN), dx(x.size(), NAN), dw(w.size(), NAN), db(O, NAN);
    k().linear_forward(out.data(), x.data(), w.data(), b.data(), s);
    k().linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), s);
    // Double references: exact (fp32 semantics), twin (rounded operands), magnitudes.
    auto run = [&](const std::vector<double>& X, const std::vector<double>& W, const std::vector<double>& Bv,
                   const std::vector<double>& DY, std::vector<double>& o, std::vector<double>& ddx,
                   std::vector<double>& ddw, std::vector<double>& ddb) {
      o.resize(out.size()), ddx.resize(dx.size()), ddw.resize(dw.size()), ddb.resize(O);
      ref::linear_forward(o.data(), X.data(), W.data(), Bv.data(), s);
      ref::linear_backward(ddx.data(), ddw.data(), ddb.data(), DY.data(), X.data(), W.data(), s);
    };
    std::vector<double> fo, fdx, fdw, fdb, to, tdx, tdw, tdb, mo, mdx, mdw, mdb, ro, rdx, rdw, rdb;
    run(to_double(x), to_double(w), to_double(b), to_double(dy), fo, fdx, fdw, fdb);
    run(to_double(xr), to_double(wr), to_double(b), to_double(dyr), to, tdx, tdw, tdb);
    run(abs_double(x), abs_double(w), abs_double(b), abs_double(dy), mo, mdx, mdw, mdb);
    run(abs_double(xr), abs_double(wr), abs_double(b), abs_double(dyr), ro, rdx, rdw, rdb);
    const double r2 = 2 * uh() + uh() * uh();
    expect_within("out vs twin", out, to, mo, 0.0, ro, gamma(I + 2));
    expect_within("dinp vs twin", dx, tdx, mdx, 0.0, rdx, gamma(O + 2));
    expect_within("dweight vs twin", dw, tdw, mdw, 0.0, rdw, gamma(N + 2));
    expect_within("dbias vs twin", db, tdb, mdb, 0.0, rdb, gamma(N + 2));
    expect_within("out vs fp32", out, fo, mo, r2, ro, gamma(I + 2));
    expect_within("dinp vs fp32", dx, fdx, mdx, r2, rdx, gamma(O + 2));
    expect_within("dweight vs fp32", dw, fdw, mdw, r2, rdw, gamma(N + 2));
    expect_within("dbias vs fp32", db, fdb, mdb, uh(), rdb, gamma(N + 2));  // dbias sums rounded dout only
    // Without dinp (the first layer) the weight gradients are unchanged.
    std::vector<float> dw2(w.size(), NAN), db2(O, NAN);
    k().linear_backward(nullptr, dw2.data(), db2.data(), dy.data(), x.data(), w.data(), s);
    EXPECT_EQ(0, std::memcmp(dw2.data(), dw.data(), dw.size() * 4));
    // Up to avx2 every table is fp32 products on rounded operands: the composition's bits (at avx2 the forward
    // rounds as it packs, not in passes of its own).
    if (level() <= IsaLevel::Avx2) {
      std::vector<float> out2(out.size(), NAN);
      rounding_kernels_for(level(), prec()).linear_forward(out2.data(), x.data(), w.data(), b.data(), s);
      EXPECT_EQ(0, std::memcmp(out2.data(), out.data(), out.size() * 4)) << "forward: not the composition's bits";
    }
  }
}

// The non-fused convolution passes (used when a table lacks the fused op) round and run fp32.
TEST_P(LowpKernelTest, Conv2dPassesWithinRoundingBound) {
  Rng rng(14);
  for (const Conv2dShape& s : {conv(3, 6, 14, 14, 16, 5, 5, 1, 0), conv(5, 2, 9, 12, 5, 3, 3, 2, 1)}) {
    SCOPED_TRACE(conv_name(s));
    auto x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, rng), w = random_vec(std::size_t(s.K) * s.C * s.R * s.S, rng);
    auto b = random_vec(s.K, rng), dy = random_vec(std::size_t(s.N) * s.K * s.P() * s.Q(), rng);
    std::vector<float> out(dy.size(), NAN), dx(x.size(), NAN), dw(w.size(), NAN), db(s.K, NAN);
    k().conv2d_forward(out.data(), x.data(), w.data(), b.data(), s);
    k().conv2d_backward_data(dx.data(), dy.data(), w.data(), s);
    k().conv2d_backward_weight(dw.data(), db.data(), dy.data(), x.data(), s);
    std::vector<double> fo(out.size()), mo(out.size()), fdx(x.size()), mdx(x.size()), fdw(w.size()), mdw(w.size()),
        fdb(s.K), mdb(s.K);
    ref::conv2d_forward(fo.data(), to_double(x).data(), to_double(w).data(), to_double(b).data(), s);
    ref::conv2d_forward(mo.data(), abs_double(x).data(), abs_double(w).data(), abs_double(b).data(), s);
    ref::conv2d_backward_data(fdx.data(), to_double(dy).data(), to_double(w).data(), s);
    ref::conv2d_backward_data(mdx.data(), abs_double(dy).data(), abs_double(w).data(), s);
    ref::conv2d_backward_weight(fdw.data(), fdb.data(), to_double(dy).data(), to_double(x).data(), s);
    ref::conv2d_backward_weight(mdw.data(), mdb.data(), abs_double(dy).data(), abs_double(x).data(), s);
    const double r2 = 2 * uh() + uh() * uh(), g = (1 + uh()) * (1 + uh());
    auto scaled = [&](std::vector<double> v) { for (auto& e : v) e *= g; return v; };
    expect_within("out", out, fo, mo, r2, scaled(mo), gamma(s.C * s.R * s.S + 2));
    expect_within("dinp", dx, fdx, mdx, r2, scaled(mdx), gamma(s.K * s.R * s.S + 2));
    expect_within("dweight", dw, fdw, mdw, r2, scaled(mdw), gamma(double(s.N) * s.P() * s.Q() + 2));
    expect_within("dbias", db, fdb, mdb, uh(), scaled(mdb), gamma(double(s.N) * s.P() * s.Q() + 2));
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (IsaLevel l : supported_isas())
    for (Precision p : {Precision::Bf16, Precision::Fp16}) out.emplace_back(l, p);
  return out;
}
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" + precision_name(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(IsaPrecision, LowpKernelTest, ::testing::ValuesIn(params()), param_name);

TEST(LowpKernelDispatch, Bf16UsesDotProductKernelsWhereTheCpuHasThem) {
  const KernelTable& fast = kernels_for(IsaLevel::Avx512 <= detect_isa() ? IsaLevel::Avx512 : detect_isa(), Precision::Bf16);
  const KernelTable& fallback = rounding_kernels_for(fast.level, Precision::Bf16);
  if (!cpu_has_avx512_bf16()) {
    // fp32 arithmetic on rounded operands: at level avx2 the AVX2 build rounding them as its kernels copy them
    // (fill_bf16_avx2: the linears' backward as the composition; their forward, LeNet's fused convs with their
    // blocked hand-over, the zoo's convs, the attention and the split sums its own), at avx512 the composition.
    if (fast.level == IsaLevel::Avx2) {
      EXPECT_NE(&fast, &fallback);
      EXPECT_NE(fast.conv2d_relu_pool_forward, fallback.conv2d_relu_pool_forward);
      EXPECT_NE(fast.conv2d_relu_pool_blocked, nullptr);
      EXPECT_EQ(fallback.conv2d_relu_pool_blocked, nullptr);
      EXPECT_NE(fast.linear_forward, fallback.linear_forward);
      EXPECT_EQ(fast.linear_backward, fallback.linear_backward);
      EXPECT_NE(fast.conv2d_forward, fallback.conv2d_forward);
      EXPECT_NE(fast.linear_forward_chunked, nullptr);
      EXPECT_EQ(fallback.linear_forward_chunked, nullptr);
    } else {
      EXPECT_EQ(&fast, &fallback);
    }
    GTEST_SKIP() << "no AVX512_BF16 on this CPU: fp32 kernels on rounded operands are the bf16 table";
  }
  EXPECT_NE(fast.linear_forward, fallback.linear_forward);
  // LeNet's fused conv: vdpbf16ps tiles, but on AMX CPUs (half-rate vdpbf16ps) the rounded fp32 kernels
  EXPECT_EQ(fast.conv2d_relu_pool_forward == fallback.conv2d_relu_pool_forward, amx_enabled());
  EXPECT_NE(dot_product_bf16_kernels().conv2d_relu_pool_forward, fallback.conv2d_relu_pool_forward);
  EXPECT_EQ(&kernels_for(IsaLevel::Avx512, Precision::Fp32), &kernels_for(IsaLevel::Avx512));
  EXPECT_THROW(parse_precision("fp8"), std::exception);
  EXPECT_EQ(parse_precision("bf16"), Precision::Bf16);
}

}  // namespace
}  // namespace ringtrain::ops
