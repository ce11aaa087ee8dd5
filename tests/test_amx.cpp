// The AMX paths of the bf16 table (ops/cpu/amx_tiles.h, gemm_bf16_amx.h, linear_amx.h, zoo_conv_amx.h):
// the tile GEMM against a double reference on shapes that cross every edge of its blocking (rows and
// columns not a multiple of 16 or of the 32-row and 512-column blocks, reductions not a multiple of 16 pair
// words or of the 256-word chunks, accumulate and bias), integer data bit for bit, and vit's split sums
// against nn/tp_reduction.cpp's composition of the same table's linear_forward, bit for bit. The conv and
// linear passes themselves are held to the twin in test_kernels_bf16_zoo.cpp and test_kernels_bf16.cpp
// (which run this table on a CPU with AMX). Skipped, not faked, where the CPU or the OS has no AMX-BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ringtrain/core/half.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/tp_reduction.h"
#include "ringtrain/ops/cpu/amx.h"
#include "ringtrain/ops/cpu/gemm_bf16_amx.h"
#include "ringtrain/ops/lowp.h"

#include "kernel_test_util.h"

namespace ringtrain::ops {
namespace {

using namespace kernel_test;

#define SKIP_WITHOUT_AMX()                                                                                       \
  if (!cpu_has_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU (or the OS refused them): not faked"

// A matrix of pair words from floats: word (r, k) = (bf16(v[r][2k]), bf16(v[r][2k+1])).
std::vector<uint32_t> pair_words(const std::vector<float>& v, int rows, int words) {
  std::vector<uint32_t> w(std::size_t(rows) * words);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = uint32_t(float_to_bf16(v[2 * i])) | (uint32_t(float_to_bf16(v[2 * i + 1])) << 16);
  return w;
}
double lo(uint32_t w) { return bf16_to_float(uint16_t(w & 0xFFFF)); }
double hi(uint32_t w) { return bf16_to_float(uint16_t(w >> 16)); }

struct GemmCase {
  int M, N, KP;
  bool bias, accumulate;
};

void check_gemm(const GemmCase& c, bool integers, Rng& rng) {
  const int ldb = (c.N + 15) / 16 * 16, lda = c.KP + 3, ldc = c.N + 5;  // strides past the extents too
  auto fill = [&](std::size_t n) { return integers ? integer_vec(n, rng, 3, 0.5f) : random_vec(n, rng); };
  const auto a = pair_words(fill(std::size_t(c.M) * lda * 2), c.M, lda);
  const auto b = pair_words(fill(std::size_t(c.KP) * ldb * 2), c.KP, ldb);
  const auto bias = fill(c.N);
  const auto c0 = fill(std::size_t(c.M) * ldc);
  std::vector<float> got = c0;
  cpu::gemm_bf16_amx(c.M, c.N, c.KP, a.data(), lda, b.data(), ldb, got.data(), ldc, c.bias ? bias.data() : nullptr,
                     c.accumulate);
  int bad = 0;
  for (int m = 0; m < c.M; ++m)
    for (int n = 0; n < ldc; ++n) {
      const std::size_t i = std::size_t(m) * ldc + n;
      if (n >= c.N) {  // past N: untouched
        if (std::memcmp(&got[i], &c0[i], 4) != 0 && bad++ < 5) ADD_FAILURE() << "C[" << m << "][" << n << "] written";
        continue;
      }
      double want = c.accumulate ? c0[i] : c.bias ? bias[n] : 0.0, mag = std::fabs(want);
      for (int k = 0; k < c.KP; ++k) {
        const uint32_t x = a[std::size_t(m) * lda + k], y = b[std::size_t(k) * ldb + n];
        want += lo(x) * lo(y) + hi(x) * hi(y);
        mag += std::fabs(lo(x) * lo(y)) + std::fabs(hi(x) * hi(y));
      }
      const double tol = integers ? 0.0 : gamma(2.0 * c.KP + 2) * mag + 1e-30;
      if (!(std::fabs(got[i] - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C[" << m << "][" << n << "] = " << got[i] << ", want " << want << " (tol " << tol << ")";
    }
  EXPECT_EQ(bad, 0) << "M " << c.M << " N " << c.N << " KP " << c.KP << " bias " << c.bias << " accumulate "
                    << c.accumulate << (integers ? " (integers: exact)" : "");
}

const GemmCase kGemmCases[] = {
    {1, 1, 1, false, false},      {1, 16, 16, true, false},    {17, 33, 15, true, false},
    {33, 17, 17, false, true},    {32, 32, 256, false, false}, {31, 47, 257, true, false},
    {64, 245, 288, false, false}, {40, 600, 300, true, false}, {70, 520, 33, false, true},
    {5, 3, 0, true, false},
};

TEST(AmxGemm, WithinFp32SumBoundOfTheExactProducts) {
  SKIP_WITHOUT_AMX();
  Rng rng(31);
  for (const GemmCase& c : kGemmCases) check_gemm(c, false, rng);
}

TEST(AmxGemm, IntegerDataExact) {
  SKIP_WITHOUT_AMX();
  Rng rng(32);
  for (const GemmCase& c : kGemmCases) check_gemm(c, true, rng);
}

// The split sums of the AMX table against tp_reduction's composition of its own linear_forward (the same
// table with the chunked entries removed): bit for bit, fused (<= 4 chunks) and per chunk (8), in place
// (32-feature blocks) and copied (odd blocks).
TEST(AmxChunkedLinear, SameBitsAsTheComposition) {
  SKIP_WITHOUT_AMX();
  const KernelTable& fused = amx_bf16_kernels();
  KernelTable composed = fused;
  composed.linear_forward_chunked = nullptr;
  composed.linear_backward_data_chunked = nullptr;
  Rng rng(33);
  struct Fwd {
    int rows, I, O, chunks;
  };
  for (const Fwd& f : {Fwd{1088, 128, 128, 4}, Fwd{33, 24, 20, 2}, Fwd{7, 40, 9, 1}, Fwd{5, 36, 17, 3}, Fwd{9, 64, 18, 8}}) {
    SCOPED_TRACE("forward rows " + std::to_string(f.rows) + " I " + std::to_string(f.I) + " O " + std::to_string(f.O) +
                 " chunks " + std::to_string(f.chunks));
    const auto x = random_vec(std::size_t(f.rows) * f.I, rng), w = random_vec(std::size_t(f.O) * f.I, rng),
               b = random_vec(f.O, rng);
    std::vector<float> got(std::size_t(f.rows) * f.O, NAN), want(got.size(), NAN);
    nn::chunked_linear_forward(fused, got.data(), x.data(), w.data(), b.data(), f.rows, f.I, f.O, f.chunks);
    nn::chunked_linear_forward(composed, want.data(), x.data(), w.data(), b.data(), f.rows, f.I, f.O, f.chunks);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4));
  }
  struct Bwd {
    int rows, O, I, chunks, groups;
  };
  for (const Bwd& d : {Bwd{1088, 384, 128, 4, 3}, Bwd{1, 12, 7, 4, 3}, Bwd{33, 24, 13, 2, 3}, Bwd{17, 256, 40, 8, 1},
                       Bwd{20, 96, 30, 1, 3}}) {
    SCOPED_TRACE("backward-data rows " + std::to_string(d.rows) + " O " + std::to_string(d.O) + " I " +
                 std::to_string(d.I) + " chunks " + std::to_string(d.chunks) + " groups " + std::to_string(d.groups));
    const auto dy = random_vec(std::size_t(d.rows) * d.O, rng), w = random_vec(std::size_t(d.O) * d.I, rng);
    std::vector<float> got(std::size_t(d.rows) * d.I, NAN), want(got.size(), NAN);
    nn::chunked_linear_backward_data(fused, got.data(), dy.data(), w.data(), d.rows, d.O, d.I, d.chunks, d.groups);
    nn::chunked_linear_backward_data(composed, want.data(), dy.data(), w.data(), d.rows, d.O, d.I, d.chunks, d.groups);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4));
  }
}

// The AMX table's conv passes on the implicit-GEMM and im2col routes (run here by name, so the sanitizer
// build, which forces level scalar, runs them too), against the exact result on the rounded operands:
// within an fp32 sum's bound (test_kernels_bf16_zoo.cpp holds them to the twin at the zoo's shapes).
TEST(AmxConv, PassesWithinFp32SumBoundOfTheRoundedOperands) {
  SKIP_WITHOUT_AMX();
  const KernelTable& k = amx_bf16_kernels();
  auto conv = [](int N, int C, int H, int K, int R, int stride, int pad) {
    Conv2dShape s;
    s.N = N, s.C = C, s.H = s.W = H, s.K = K, s.R = s.S = R, s.stride = stride, s.pad = pad;
    return s;
  };
  Rng rng(34);
  for (const Conv2dShape& s : {conv(3, 64, 7, 64, 3, 1, 1), conv(2, 17, 5, 19, 3, 1, 1), conv(5, 40, 4, 33, 3, 2, 1),
                               conv(3, 32, 1, 48, 3, 1, 1), conv(2, 24, 6, 35, 1, 1, 0), conv(1, 3, 9, 16, 7, 2, 3),
                               conv(4, 20, 5, 16, 5, 1, 2),
                               // one output pixel reading the whole input (the linear on the live taps):
                               // resnet18's layer4 shapes, no padding, and one (stride 3) that leaves a row out
                               conv(3, 40, 2, 33, 3, 2, 1), conv(2, 17, 3, 20, 3, 1, 0), conv(2, 18, 3, 17, 3, 3, 1),
                               conv(2, 512, 1, 512, 3, 1, 1)}) {
    SCOPED_TRACE("N" + std::to_string(s.N) + " C" + std::to_string(s.C) + " H" + std::to_string(s.H) + " K" +
                 std::to_string(s.K) + " R" + std::to_string(s.R) + " stride " + std::to_string(s.stride));
    const std::size_t nx = std::size_t(s.N) * s.C * s.H * s.W, nw = std::size_t(s.K) * s.C * s.R * s.S,
                      ny = std::size_t(s.N) * s.K * s.P() * s.Q();
    const auto x = random_vec(nx, rng), w = random_vec(nw, rng), b = random_vec(s.K, rng), dy = random_vec(ny, rng);
    std::vector<float> y(ny, NAN), dx(nx, NAN), dw(nw, NAN), db(s.K, NAN);
    k.conv2d_forward(y.data(), x.data(), w.data(), b.data(), s);
    k.conv2d_backward_data(dx.data(), dy.data(), w.data(), s);
    k.conv2d_backward_weight(dw.data(), db.data(), dy.data(), x.data(), s);
    const auto xr = to_double(rounded(x)), wr = to_double(rounded(w)), dyr = to_double(rounded(dy)), bd = to_double(b);
    const auto xa = abs_double(rounded(x)), wa = abs_double(rounded(w)), dya = abs_double(rounded(dy)), ba = abs_double(b);
    std::vector<double> ey(ny), edx(nx), edw(nw), edb(s.K), my(ny), mdx(nx), mdw(nw), mdb(s.K);
    ref::conv2d_forward(ey.data(), xr.data(), wr.data(), bd.data(), s);
    ref::conv2d_forward(my.data(), xa.data(), wa.data(), ba.data(), s);
    ref::conv2d_backward_data(edx.data(), dyr.data(), wr.data(), s);
    ref::conv2d_backward_data(mdx.data(), dya.data(), wa.data(), s);
    ref::conv2d_backward_weight(edw.data(), edb.data(), dyr.data(), xr.data(), s);
    ref::conv2d_backward_weight(mdw.data(), mdb.data(), dya.data(), xa.data(), s);
    auto check = [](const char* what, const std::vector<float>& got, const std::vector<double>& want,
                    const std::vector<double>& mag, double n) {
      int bad = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= gamma(n) * mag[i] + kU * std::fabs(want[i]) + 1e-30) && bad++ < 5)
          ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
      EXPECT_EQ(bad, 0) << what;
    };
    check("out", y, ey, my, double(s.C) * s.R * s.S + 2);
    check("dinp", dx, edx, mdx, double(s.K) * s.R * s.S + 2);
    check("dweight", dw, edw, mdw, double(s.N) * s.P() * s.Q() + 2);
    check("dbias", db, edb, mdb, double(s.N) * s.P() * s.Q() + 2);
  }
}

// Which table runs: AMX where the CPU has it (unless RINGTRAIN_AMX=0), vdpbf16ps with AVX512_BF16 only.
TEST(AmxDispatch, Bf16TableFollowsTheCpu) {
  if (!cpu_has_avx512_bf16()) {
    EXPECT_FALSE(cpu_has_amx_bf16());
    EXPECT_THROW(amx_bf16_kernels(), std::exception);
    EXPECT_THROW(dot_product_bf16_kernels(), std::exception);
    GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  }
  const KernelTable& t = kernels_for(IsaLevel::Avx512, Precision::Bf16);
  if (!cpu_has_amx_bf16()) {
    EXPECT_THROW(amx_bf16_kernels(), std::exception);
    EXPECT_EQ(&t, &dot_product_bf16_kernels());
    GTEST_SKIP() << "no AMX-BF16 on this CPU: the vdpbf16ps table is the bf16 table";
  }
  EXPECT_EQ(&t, amx_enabled() ? &amx_bf16_kernels() : &dot_product_bf16_kernels());
  EXPECT_NE(amx_bf16_kernels().linear_forward, dot_product_bf16_kernels().linear_forward);
  EXPECT_NE(amx_bf16_kernels().conv2d_forward, dot_product_bf16_kernels().conv2d_forward);
  // LeNet's fused conv + ReLU + pool: the rounded fp32 kernels (vdpbf16ps is half-rate on AMX CPUs).
  EXPECT_EQ(amx_bf16_kernels().conv2d_relu_pool_forward,
            rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16).conv2d_relu_pool_forward);
}

}  // namespace
}  // namespace ringtrain::ops
