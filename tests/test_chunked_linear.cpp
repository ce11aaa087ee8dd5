// vit's split sums (nn/tp_reduction.h) at every ISA level this CPU runs, the reference and 16-bit tables
// included (they compose linear_forward, but for the vdpbf16ps bf16 table and AVX2's, which runs the fp32 passes on
// rounded operands; the fast fp32 tables run the fused linear_*_chunked kernels):
//  - against the exact sum in double, within gamma(n) sum|terms| (n: the reduction length + the tree + the bias);
//  - the split property the --tp bit-identity rests on (docs/DISTRIBUTED.md, bench/grid_equality.sh): the whole
//    sum over C chunks equals, bit for bit, the sums of a rank's C/T chunks added as the all-reduce adds them
//    ((a + b) for 2 ranks, ((a + b) + (c + d)) for 4), then the bias;
//  - a fused 16-bit table (vdpbf16ps, or AVX2's rounded operands) against its own composition, bit for bit.
// Shapes: vit's (1088 = 64 x 17 token rows; 512 / 128 features; q | k | v in 3 groups) and odd ones (one row, widths
// that are no multiple of 8, more rows than one 96-row block, more than 128 columns, 3 chunks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/nn/tp_reduction.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::nn {
namespace {

using ops::IsaLevel;
using ops::KernelTable;

constexpr double kU = 1.0 / 16777216.0;
double gamma(double n) { return n * kU / (1.0 - n * kU); }

std::vector<float> random_vec(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

void expect_equal(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " != " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

// cols x rows sub-matrix copy: dst [rows][cols.size()] <- src[r][cols[j]] (row stride ld).
std::vector<float> take_cols(const std::vector<float>& src, int rows, int ld, const std::vector<int>& cols) {
  std::vector<float> d(std::size_t(rows) * cols.size());
  for (int r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols.size(); ++j) d[r * cols.size() + j] = src[std::size_t(r) * ld + cols[j]];
  return d;
}
std::vector<float> take_rows(const std::vector<float>& src, int ld, const std::vector<int>& rows) {
  std::vector<float> d;
  for (int r : rows) d.insert(d.end(), src.begin() + std::size_t(r) * ld, src.begin() + std::size_t(r + 1) * ld);
  return d;
}
std::vector<int> range(int a, int b) {
  std::vector<int> v;
  for (int i = a; i < b; ++i) v.push_back(i);
  return v;
}
// The all-reduce's order over `parts` (2: a + b; 4: (a + b) + (c + d)), then + bias per column.
std::vector<float> tree(const std::vector<std::vector<float>>& parts, const std::vector<float>* bias, int cols) {
  std::vector<float> out(parts[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    float t = parts.size() == 4 ? (parts[0][i] + parts[1][i]) + (parts[2][i] + parts[3][i])
                                : parts.size() == 2 ? parts[0][i] + parts[1][i] : parts[0][i];
    out[i] = bias ? t + (*bias)[i % cols] : t;
  }
  return out;
}

std::vector<const KernelTable*> tables() {
  std::vector<const KernelTable*> t;
  const char* env = std::getenv("RINGTRAIN_ISA");
  for (IsaLevel level : ops::supported_isas()) {
    if (env && *env && level != IsaLevel::Ref && level != ops::parse_isa(env)) continue;
    t.push_back(&ops::kernels_for(level));
  }
  t.push_back(&ops::kernels_for(ops::default_isa(), ops::Precision::Bf16));  // composing, or fused with vdpbf16ps
  return t;
}
// A fused 16-bit table's own composition: the same linear_forward, no fused entries.
bool fused_16bit(const KernelTable& k) {
  return k.linear_forward_chunked && k.linear_forward != ops::kernels_for(k.level).linear_forward;
}
KernelTable composing(const KernelTable& k) {
  KernelTable c = k;
  c.linear_forward_chunked = nullptr;
  c.linear_backward_data_chunked = nullptr;
  return c;
}
std::string table_name(const KernelTable& k) {
  return std::string(ops::isa_name(k.level)) + (k.linear_forward_chunked ? " (fused)" : " (composed)");
}

struct FwdShape {
  int rows, I, O, chunks;
};

TEST(ChunkedLinear, ForwardWithinBoundAndSplitsBitForBit) {
  const FwdShape shapes[] = {{1088, 512, 128, 4}, {1088, 128, 128, 4}, {1, 12, 13, 4}, {17, 20, 7, 2},
                             {3, 9, 19, 3},       {97, 40, 130, 4},    {5, 6, 5, 1}};
  Rng rng(7);
  for (const KernelTable* k : tables()) {
    for (const FwdShape& sh : shapes) {
      SCOPED_TRACE(table_name(*k) + " rows " + std::to_string(sh.rows) + " I " + std::to_string(sh.I) + " O " +
                   std::to_string(sh.O) + " chunks " + std::to_string(sh.chunks));
      const auto x = random_vec(std::size_t(sh.rows) * sh.I, rng), W = random_vec(std::size_t(sh.O) * sh.I, rng),
                 b = random_vec(std::size_t(sh.O), rng);
      std::vector<float> out(std::size_t(sh.rows) * sh.O);
      chunked_linear_forward(*k, out.data(), x.data(), W.data(), b.data(), sh.rows, sh.I, sh.O, sh.chunks);
      // (The bf16 table rounds its operands: its bound is the 16-bit tests' business; here it splits bit for bit.)
      const bool fp32 = k->linear_forward == ops::kernels_for(k->level).linear_forward;
      int bad = 0;
      for (int r = 0; fp32 && r < sh.rows; ++r)
        for (int o = 0; o < sh.O; ++o) {
          double exact = b[o], mag = std::fabs(b[o]);
          for (int i = 0; i < sh.I; ++i) {
            exact += double(x[std::size_t(r) * sh.I + i]) * W[std::size_t(o) * sh.I + i];
            mag += std::fabs(double(x[std::size_t(r) * sh.I + i]) * W[std::size_t(o) * sh.I + i]);
          }
          const double got = out[std::size_t(r) * sh.O + o];
          if (!(std::fabs(got - exact) <= gamma(sh.I + sh.chunks + 2) * mag + 1e-37) && bad++ < 5)
            ADD_FAILURE() << "out[" << r << "][" << o << "] = " << got << ", exact " << exact;
        }
      EXPECT_EQ(bad, 0);
      if (fused_16bit(*k)) {
        std::vector<float> composed(out.size());
        chunked_linear_forward(composing(*k), composed.data(), x.data(), W.data(), b.data(), sh.rows, sh.I, sh.O, sh.chunks);
        expect_equal("fused against composed", out, composed);
      }
      // Ranks holding chunks/T consecutive chunks each (T = 2 and T = chunks), no bias; their sums added as the
      // all-reduce adds them, then the bias: the whole sum's bits.
      for (int T : {2, sh.chunks}) {
        if (sh.chunks % T != 0 || T == 1 || (T != 2 && T != 4)) continue;
        const int per = sh.I / T;
        std::vector<std::vector<float>> parts;
        for (int t = 0; t < T; ++t) {
          const auto cols = range(t * per, (t + 1) * per);
          const auto xs = take_cols(x, sh.rows, sh.I, cols), Ws = take_cols(W, sh.O, sh.I, cols);
          parts.emplace_back(std::size_t(sh.rows) * sh.O);
          chunked_linear_forward(*k, parts.back().data(), xs.data(), Ws.data(), nullptr, sh.rows, per, sh.O,
                                 sh.chunks / T);
        }
        expect_equal(("split over " + std::to_string(T)).c_str(), tree(parts, &b, sh.O), out);
      }
    }
  }
}

struct BwdShape {
  int rows, I, O, chunks, groups;
};

TEST(ChunkedLinear, BackwardDataWithinBoundAndSplitsBitForBit) {
  const BwdShape shapes[] = {{1088, 128, 384, 4, 3}, {1088, 128, 512, 4, 1}, {1, 7, 12, 4, 3},
                             {33, 13, 24, 2, 3},     {100, 19, 8, 4, 1},      {9, 140, 12, 4, 1}};
  Rng rng(8);
  for (const KernelTable* k : tables()) {
    for (const BwdShape& sh : shapes) {
      SCOPED_TRACE(table_name(*k) + " rows " + std::to_string(sh.rows) + " I " + std::to_string(sh.I) + " O " +
                   std::to_string(sh.O) + " chunks " + std::to_string(sh.chunks) + " groups " + std::to_string(sh.groups));
      const auto dout = random_vec(std::size_t(sh.rows) * sh.O, rng), W = random_vec(std::size_t(sh.O) * sh.I, rng);
      std::vector<float> din(std::size_t(sh.rows) * sh.I);
      chunked_linear_backward_data(*k, din.data(), dout.data(), W.data(), sh.rows, sh.O, sh.I, sh.chunks, sh.groups);
      const bool fp32 = k->linear_forward == ops::kernels_for(k->level).linear_forward;
      int bad = 0;
      for (int r = 0; fp32 && r < sh.rows; ++r)
        for (int i = 0; i < sh.I; ++i) {
          double exact = 0, mag = 0;
          for (int o = 0; o < sh.O; ++o) {
            const double t = double(dout[std::size_t(r) * sh.O + o]) * W[std::size_t(o) * sh.I + i];
            exact += t, mag += std::fabs(t);
          }
          const double got = din[std::size_t(r) * sh.I + i];
          if (!(std::fabs(got - exact) <= gamma(sh.O + sh.chunks + 2) * mag + 1e-37) && bad++ < 5)
            ADD_FAILURE() << "din[" << r << "][" << i << "] = " << got << ", exact " << exact;
        }
      EXPECT_EQ(bad, 0);
      const int per_group = sh.O / sh.groups, block = per_group / sh.chunks;
      // (The composition pairs the features of a chunk's blocks laid end to end; the fused pass pairs within each
      // block: the same pairs where blocks are of even width or there is one group.)
      if (fused_16bit(*k) && (block % 2 == 0 || sh.groups == 1)) {
        std::vector<float> composed(din.size());
        chunked_linear_backward_data(composing(*k), composed.data(), dout.data(), W.data(), sh.rows, sh.O, sh.I,
                                     sh.chunks, sh.groups);
        expect_equal("fused against composed", din, composed);
      }
      // A rank with chunks [t per, (t+1) per) holds, in every group, those chunks' blocks: dout's columns and W's rows.
      for (int T : {2, sh.chunks}) {
        if (sh.chunks % T != 0 || T == 1 || (T != 2 && T != 4)) continue;
        const int per = sh.chunks / T;
        std::vector<std::vector<float>> parts;
        for (int t = 0; t < T; ++t) {
          std::vector<int> cols;
          for (int g = 0; g < sh.groups; ++g)
            for (int c = t * per * block; c < (t + 1) * per * block; ++c) cols.push_back(g * per_group + c);
          const auto ds = take_cols(dout, sh.rows, sh.O, cols), Ws = take_rows(W, sh.I, cols);
          parts.emplace_back(std::size_t(sh.rows) * sh.I);
          chunked_linear_backward_data(*k, parts.back().data(), ds.data(), Ws.data(), sh.rows, int(cols.size()), sh.I,
                                       per, sh.groups);
        }
        expect_equal(("split over " + std::to_string(T)).c_str(), tree(parts, nullptr, sh.I), din);
      }
    }
  }
}

}  // namespace
}  // namespace ringtrain::nn
