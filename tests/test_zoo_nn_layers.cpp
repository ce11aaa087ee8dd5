// The zoo's normalisation, activation, elementwise and Transformer layers in nn::Model graphs: torch semantics
// of BatchNorm2d's statistics (a case computed by hand and by torch 1.13), dropout's mask (a pure function of
// seed, step and sample id; keep rate; eval identity; the backward's mask), the token layers' layouts,
// parameter and buffer names / shapes / initialisation, 1 vs 2 threads on graphs with batch norm in training
// (a meeting point) and residual fan-out, and steps that allocate nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/attention.h"
#include "ringtrain/nn/batch_norm.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/elementwise.h"
#include "ringtrain/nn/layer_norm.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/nn/patch_embedding.h"
#include "ringtrain/nn/pointwise.h"
#include "ringtrain/nn/token_linear.h"
#include "ringtrain/nn/vit_tokens.h"
#include "ringtrain/ops/kernels.h"

#include "count_allocations.h"

namespace ringtrain::nn {
namespace {

constexpr double kU = 1.0 / 16777216.0;
double gamma(double n) { return n * kU / (1.0 - n * kU); }

// ref and RINGTRAIN_ISA's level when set, else every level this CPU runs.
std::vector<ops::IsaLevel> levels_under_test() {
  const char* env = std::getenv("RINGTRAIN_ISA");
  std::vector<ops::IsaLevel> out;
  for (ops::IsaLevel l : ops::supported_isas())
    if (!(env && *env) || l == ops::IsaLevel::Ref || l == ops::parse_isa(env)) out.push_back(l);
  return out;
}

std::vector<float> random_vec(std::size_t n, Rng& rng, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

const BufferView& buffer_named(const ParameterSet& p, const std::string& name) {
  for (const BufferView& b : p.buffer_views())
    if (b.name == name) return b;
  throw Error("no buffer " + name);
}

// ---- batch norm: torch's statistics ------------------------------------------------------------------
// x [N=2, C=2, 1, 2]: channel 0 holds 1 2 | 3 6 (mean 3, biased var 3.5, unbiased 14/3), channel 1
// -1 -1 | -1 3 (mean 0, biased 3, unbiased 4). torch.nn.BatchNorm2d(2) after one training call:
// running_mean = 0.1 mean = (0.3, 0), running_var = 0.9 + 0.1 unbiased = (1.3666667, 1.3), tracked 1; after
// a second: (0.57, 0), (1.6966667, 1.57), 2. The outputs below are torch 1.13's (float), as is eval mode's.
TEST(ZooNnBatchNorm, RunningStatisticsAsTorch) {
  for (ops::IsaLevel level : levels_under_test()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    GraphBuilder g({2, 1, 2});
    g.add(std::make_unique<BatchNorm2d>("bn", 2));
    auto model = g.build();
    model->init_parameters(1);
    model->reserve(2);
    const std::vector<float> x = {1, 2, -1, -1, 3, 6, -1, 3};
    const float train_out[] = {-1.0690434f, -0.5345217f, -0.5773493f, -0.5773493f,
                               0.0f,        1.6035651f,  -0.5773493f, 1.7320479f};
    const float eval_out[] = {0.33011773f, 1.0978335f, -0.79808438f, -0.79808438f,
                              1.8655492f,  4.1686964f, -0.79808438f, 2.3942533f};
    // The kernel test's bound for HW = 2: gamma(HW + 4) |a| (|x| + |mean| + mean|x|) with |a| < 1 and the
    // bracket below 12, plus torch's own float rounding of the same size.
    const double tol = 2 * gamma(6) * 12;
    const float* y = model->forward(k, x.data(), 2);
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], train_out[i], tol) << i;
    ParameterSet& p = model->params();
    const float* rm = p.buffers() + buffer_named(p, "bn.running_mean").offset;
    const float* rv = p.buffers() + buffer_named(p, "bn.running_var").offset;
    const int64_t* tracked = p.counters() + buffer_named(p, "bn.num_batches_tracked").offset;
    // Running statistics: sums of 4 values and one momentum update, a few roundings.
    const double stat_tol = gamma(8) * 2;
    EXPECT_NEAR(rm[0], 0.3, stat_tol);
    EXPECT_NEAR(rm[1], 0.0, stat_tol);
    EXPECT_NEAR(rv[0], 0.9 + 0.1 * 14.0 / 3.0, stat_tol);
    EXPECT_NEAR(rv[1], 1.3, stat_tol);
    EXPECT_EQ(*tracked, 1);
    model->forward(k, x.data(), 2);
    EXPECT_NEAR(rm[0], 0.57, stat_tol);
    EXPECT_NEAR(rv[0], 0.9 * (0.9 + 0.1 * 14.0 / 3.0) + 0.1 * 14.0 / 3.0, stat_tol);
    EXPECT_NEAR(rv[1], 1.57, stat_tol);
    EXPECT_EQ(*tracked, 2);
    model->set_training(false);
    y = model->forward(k, x.data(), 2);
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], eval_out[i], 4 * tol) << i;  // values up to 4.2
    EXPECT_EQ(*tracked, 2) << "eval mode counts nothing";
    EXPECT_NEAR(rm[0], 0.57, stat_tol) << "eval mode updates nothing";
  }
}

TEST(ZooNnBatchNorm, RefusesOneValuePerChannelInTraining) {
  GraphBuilder g({3, 1, 1});
  g.add(std::make_unique<BatchNorm2d>("bn", 3));
  auto model = g.build();
  model->reserve(1);
  const std::vector<float> x = {1, 2, 3};
  EXPECT_THROW(model->forward(ops::reference_kernels(), x.data(), 1), Error);
  model->set_training(false);
  EXPECT_NO_THROW(model->forward(ops::reference_kernels(), x.data(), 1));
}

// ---- names, shapes, initialisation -------------------------------------------------------------------
TEST(ZooNnLayers, ParameterAndBufferNamesShapesAndInit) {
  GraphBuilder g({16, 4, 4});
  g.add(std::make_unique<BatchNorm2d>("layer1.0.bn1", 16));
  g.add(std::make_unique<PatchTokens>("patches"));  // [16 tokens, 16]
  g.add(std::make_unique<ClassToken>("class_token", 16));
  g.add(std::make_unique<PositionEmbedding>("encoder.pos_embedding", 17, 16));
  g.add(std::make_unique<LayerNorm>("encoder.layers.encoder_layer_0.ln_1", 16, 1e-6));
  g.add(std::make_unique<MultiheadSelfAttention>("encoder.layers.encoder_layer_0.self_attention", 16, 4));
  const double xavier = std::sqrt(6.0 / (16 + 64));
  g.add(std::make_unique<TokenLinear>("encoder.layers.encoder_layer_0.mlp.0", 16, 64, Init::uniform(xavier),
                                      Init::normal(1e-6)));
  g.add(std::make_unique<GELU>("gelu"));
  g.add(std::make_unique<TokenLinear>("encoder.layers.encoder_layer_0.mlp.3", 64, 16));
  g.add(std::make_unique<SelectToken>("cls", 0));
  auto model = g.build();
  struct Want {
    const char* name;
    Shape shape;
    Init::Kind kind;
    double a;
  };
  const double in_proj = std::sqrt(6.0 / (16 + 48));
  const std::vector<Want> want = {
      {"layer1.0.bn1.weight", {16}, Init::Constant, 1.0},
      {"layer1.0.bn1.bias", {16}, Init::Constant, 0.0},
      {"class_token", {1, 1, 16}, Init::Constant, 0.0},
      {"encoder.pos_embedding", {1, 17, 16}, Init::Normal, 0.02},
      {"encoder.layers.encoder_layer_0.ln_1.weight", {16}, Init::Constant, 1.0},
      {"encoder.layers.encoder_layer_0.ln_1.bias", {16}, Init::Constant, 0.0},
      {"encoder.layers.encoder_layer_0.self_attention.in_proj_weight", {48, 16}, Init::Uniform, in_proj},
      {"encoder.layers.encoder_layer_0.self_attention.in_proj_bias", {48}, Init::Constant, 0.0},
      {"encoder.layers.encoder_layer_0.self_attention.out_proj.weight", {16, 16}, Init::FanInUniform, 0.0},
      {"encoder.layers.encoder_layer_0.self_attention.out_proj.bias", {16}, Init::Constant, 0.0},
      {"encoder.layers.encoder_layer_0.mlp.0.weight", {64, 16}, Init::Uniform, xavier},
      {"encoder.layers.encoder_layer_0.mlp.0.bias", {64}, Init::Normal, 1e-6},
      {"encoder.layers.encoder_layer_0.mlp.3.weight", {16, 64}, Init::FanInUniform, 0.0},
      {"encoder.layers.encoder_layer_0.mlp.3.bias", {16}, Init::FanInUniform, 0.0},
  };
  const auto& views = model->params().views();
  ASSERT_EQ(views.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(views[i].name, want[i].name);
    EXPECT_EQ(views[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(views[i].init.kind, want[i].kind) << want[i].name;
    if (want[i].kind != Init::FanInUniform) {
      EXPECT_DOUBLE_EQ(views[i].init.a, want[i].a) << want[i].name;
    }
  }
  EXPECT_EQ(model->params().view("encoder.layers.encoder_layer_0.self_attention.out_proj.weight").fan_in, 16);
  EXPECT_EQ(model->params().view("encoder.layers.encoder_layer_0.mlp.3.weight").fan_in, 64);
  const auto& bufs = model->params().buffer_views();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].name, "layer1.0.bn1.running_mean");
  EXPECT_EQ(bufs[0].shape, Shape({16}));
  EXPECT_FALSE(bufs[0].int64);
  EXPECT_EQ(bufs[0].initial, 0.0);
  EXPECT_EQ(bufs[1].name, "layer1.0.bn1.running_var");
  EXPECT_EQ(bufs[1].initial, 1.0);
  EXPECT_EQ(bufs[2].name, "layer1.0.bn1.num_batches_tracked");
  EXPECT_TRUE(bufs[2].int64);
  EXPECT_EQ(bufs[2].shape, Shape{});
  EXPECT_EQ(model->value_shape(10), Shape({16}));  // the selected class token
  // Initialised values: constants exactly; the position embedding's sample std near 0.02 (272 draws: the
  // sample variance's relative standard error is sqrt(2 / 272) = 8.6%, 5 of those bound it).
  model->init_parameters(3);
  ParameterSet& p = model->params();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(p.param(0)[i], 1.0f);
    EXPECT_EQ(p.param(1)[i], 0.0f);
    EXPECT_EQ(p.param(2)[i], 0.0f);
  }
  double sq = 0.0;
  for (int i = 0; i < 17 * 16; ++i) sq += double(p.param(3)[i]) * p.param(3)[i];
  const double var = sq / (17 * 16);
  EXPECT_NEAR(var / (0.02 * 0.02), 1.0, 5 * std::sqrt(2.0 / 272));
  EXPECT_EQ(p.buffers()[bufs[1].offset], 1.0f);
  // forward_macs: the attention's projections and core, the MLP, per sample.
  const double T = 17, D = 16;
  EXPECT_DOUBLE_EQ(model->layers()[5]->forward_macs(), T * D * 3 * D + T * D * D + 2 * T * T * D);
  EXPECT_DOUBLE_EQ(model->layers()[6]->forward_macs(), T * D * 64);
}

TEST(ZooNnLayers, AttentionRefusesIndivisibleHeads) {
  EXPECT_THROW(MultiheadSelfAttention("attn", 10, 3), Error);
  EXPECT_NO_THROW(MultiheadSelfAttention("attn", 12, 3));
}

// ---- token layers and elementwise layouts (exact: data movement and single adds) ------------------------
TEST(ZooNnLayers, TokenLayoutsAsTorchvision) {
  const ops::KernelTable& k = ops::reference_kernels();
  // [D=3, h=1, w=2] -> patches [2, 3] -> class token [3, 3] -> + pos -> select token 1 (the first patch).
  GraphBuilder g({3, 1, 2});
  g.add(std::make_unique<PatchTokens>("patches"));
  g.add(std::make_unique<ClassToken>("class_token", 3));
  g.add(std::make_unique<PositionEmbedding>("pos", 3, 3));
  g.add(std::make_unique<SelectToken>("sel", 1));
  auto model = g.build();
  model->reserve(2);
  ParameterSet& p = model->params();
  for (int d = 0; d < 3; ++d) p.param(0)[d] = 100.0f + d;                  // class token
  for (int i = 0; i < 9; ++i) p.param(1)[i] = 0.5f * float(i);              // pos [3][3]
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};     // sample 0: d0 = 1 2, d1 = 3 4, d2 = 5 6
  const float* y = model->forward(k, x.data(), 2);
  // token 1 = patch 0 = (x[d][0]) = (1, 3, 5) + pos[1] = (1.5, 2, 2.5)
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{2.5f, 5.0f, 7.5f, 8.5f, 11.0f, 13.5f}));
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  model->backward(k, x.data(), dy.data(), 2);
  // d class token = 0 (token 0 not selected); d pos[1] = sum over samples = (5, 7, 9), other rows 0.
  for (int d = 0; d < 3; ++d) EXPECT_EQ(p.grad(0)[d], 0.0f);
  const std::vector<float> dpos(p.grad(1), p.grad(1) + 9);
  EXPECT_EQ(dpos, (std::vector<float>{0, 0, 0, 5, 7, 9, 0, 0, 0}));
}

// PatchEmbedding is Conv2d with the patch as kernel and stride followed by PatchTokens: the same parameters
// (names, shapes, init from one seed), and tokens, parameter gradients and input gradient within the bound of
// their sums (the conv and linear kernels add the bias and order the terms each their own way, the reference
// ones included), for one and several channels, square and oblong inputs, batches of 1 and 3, one and two
// threads, at every level.
TEST(ZooNnLayers, PatchEmbeddingIsConvThenPatchTokens) {
  struct Case {
    int C, H, W, D, patch, N, threads;
  };
  for (const Case& c : {Case{1, 28, 28, 16, 7, 3, 1}, Case{3, 6, 9, 5, 3, 1, 1}, Case{2, 8, 4, 9, 2, 3, 2}})
    for (ops::IsaLevel level : levels_under_test()) {
      SCOPED_TRACE(std::string(ops::isa_name(level)) + " C" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
                   std::to_string(c.W) + " patch " + std::to_string(c.patch));
      const ops::KernelTable& k = ops::kernels_for(level);
      Rng rng(uint64_t(c.C * 100 + c.H));
      GraphBuilder a({c.C, c.H, c.W}), b({c.C, c.H, c.W});
      a.add(std::make_unique<PatchEmbedding>("conv_proj", c.C, c.D, c.patch));
      b.add(std::make_unique<Conv2d>("conv_proj", c.C, c.D, c.patch, c.patch, 0));
      b.add(std::make_unique<PatchTokens>("patch_tokens"));
      auto fused = a.build(), plain = b.build();
      const int T = (c.H / c.patch) * (c.W / c.patch);
      ASSERT_EQ(fused->value_shape(1), Shape({T, c.D}));
      for (auto* m : {fused.get(), plain.get()}) {
        m->init_parameters(9);
        m->set_threads(c.threads);
        m->set_input_gradient(true);
        m->reserve(c.N);
      }
      const ParameterSet &pf = fused->params(), &pp = plain->params();
      ASSERT_EQ(pf.size(), pp.size());
      ASSERT_EQ(pf.views().size(), pp.views().size());
      for (std::size_t i = 0; i < pf.views().size(); ++i) {
        EXPECT_EQ(pf.views()[i].name, pp.views()[i].name);
        EXPECT_EQ(pf.views()[i].shape, pp.views()[i].shape);
      }
      for (const ParamView& v : pf.views())
        EXPECT_EQ(0, std::memcmp(pf.params() + v.offset, pp.params() + v.offset, v.numel * sizeof(float)))
            << "initial " << v.name;
      const auto x = random_vec(std::size_t(c.N) * c.C * c.H * c.W, rng, -1, 1);
      const auto dy = random_vec(std::size_t(c.N) * T * c.D, rng, -1, 1);
      const float* yf = fused->forward(k, x.data(), c.N);
      const std::vector<float> tokens(yf, yf + dy.size());
      const float* yp = plain->forward(k, x.data(), c.N);
      fused->backward(k, x.data(), dy.data(), c.N);
      plain->backward(k, x.data(), dy.data(), c.N);
      // Bounds: a token sums C*p*p products and the bias; a weight gradient N*T products; an input gradient D.
      const int taps = c.C * c.patch * c.patch;
      auto expect_same = [&](const char* what, const float* got, const float* want, std::size_t n, double terms,
                             double magnitude) {
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_NEAR(got[i], want[i], 2 * gamma(terms + 2) * magnitude) << what << "[" << i << "]";
      };
      expect_same("tokens", tokens.data(), yp, tokens.size(), taps, taps + 1.0);
      for (const ParamView& v : pf.views())
        expect_same(v.name.c_str(), pf.grads() + v.offset, pp.grads() + v.offset, v.numel, double(c.N) * T,
                    double(c.N) * T);
      expect_same("dinput", fused->input_grad(), plain->input_grad(), x.size(), c.D, c.D);
    }
}

TEST(ZooNnLayers, PatchEmbeddingRefusesPatchesThatDoNotTile) {
  GraphBuilder g({1, 28, 27});
  g.add(std::make_unique<PatchEmbedding>("conv_proj", 1, 8, 7));
  EXPECT_THROW(g.build(), Error);
}

TEST(ZooNnLayers, TokenLinearIsLinearPerToken) {
  Rng rng(4);
  const ops::KernelTable& k = ops::kernels_for(levels_under_test().back());
  GraphBuilder g({5, 7});
  g.add(std::make_unique<TokenLinear>("fc", 7, 3));
  auto model = g.build();
  model->init_parameters(2);
  model->reserve(3);
  const std::vector<float> x = random_vec(3 * 5 * 7, rng, -1, 1);
  const float* y = model->forward(k, x.data(), 3);
  std::vector<float> want(3 * 5 * 3);
  k.linear_forward(want.data(), x.data(), model->params().param(0), model->params().param(1), {15, 7, 3});
  EXPECT_EQ(std::vector<float>(y, y + want.size()), want);
  EXPECT_EQ(model->value_shape(1), Shape({5, 3}));
}

TEST(ZooNnLayers, AddAndFlatten) {
  const ops::KernelTable& k = ops::reference_kernels();
  GraphBuilder g({2, 1, 2});
  const int a = g.add(std::make_unique<ReLU6>("relu6"));
  const int b = g.add(std::make_unique<Flatten>("flat_a"), {a});
  const int c = g.add(std::make_unique<Flatten>("flat_in"), {GraphBuilder::kInput});
  g.add(std::make_unique<Add>("add"), {b, c});
  auto model = g.build();
  model->reserve(1);
  const std::vector<float> x = {-1, 3, 7, 0.5f};
  const float* y = model->forward(k, x.data(), 1);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{-1, 6, 13, 1}));
  EXPECT_EQ(model->value_shape(b), Shape({4}));
  GraphBuilder mismatched({2, 2});
  const int fl = mismatched.add(std::make_unique<Flatten>("f"));
  mismatched.add(std::make_unique<Add>("add"), {GraphBuilder::kInput, fl});
  EXPECT_THROW(mismatched.build(), Error);
}

// MultiheadSelfAttention and TokenLinear wire linear ops and the attention core through layer-owned buffers.
// The oracle is the same composition written again in double from the reference ops, its gradients checked by
// central differences here (relative 1e-6 above the rounding floor, as test_zoo_nn_gradcheck.cpp). The float
// layers then must match it normwise per tensor within 2^-10 of the tensor's largest value: a mis-wired
// buffer, offset or transpose changes a gradient by about its own size, while float rounding through these
// few ops (each held to its derived bound in test_zoo_nn_kernels.cpp: gamma(3D + T + 8) ~ 3e-6 relative to
// magnitudes within a small factor of the values here) stays two orders below 2^-10.
TEST(ZooNnLayers, AttentionLayerIsTheComposedOps) {
  const int N = 3, T = 5, D = 8, H = 2, O = 3;
  GraphBuilder g({T, D});
  g.add(std::make_unique<PositionEmbedding>("pos", T, D));  // its gradient: the input's, summed over samples
  g.add(std::make_unique<MultiheadSelfAttention>("attn", D, H));
  g.add(std::make_unique<TokenLinear>("fc", D, O));
  auto model = g.build();
  model->init_parameters(3);
  model->reserve(N);
  ParameterSet& p = model->params();
  for (int j = 0; j < 3 * D; ++j) p.param(2)[j] = 0.1f * float(j % 5) - 0.2f;  // nonzero in_proj_bias
  Rng rng(8);
  const std::vector<float> x = random_vec(std::size_t(N) * T * D, rng, -1, 1), R = random_vec(std::size_t(N) * T * O, rng, -1, 1);
  // The double composition, parameters copied from the model.
  std::vector<std::vector<double>> w(p.views().size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i].assign(p.param(int(i)), p.param(int(i)) + p.views()[i].numel);
  const std::vector<double> xd(x.begin(), x.end()), Rd(R.begin(), R.end());
  const int rows = N * T;
  const ops::AttentionShape as{N, T, D, H};
  std::vector<double> x0(rows * D), qkv(rows * 3 * D), att(rows * D), y(rows * D), z(rows * O), probs(N * H * T * T);
  auto forward = [&] {
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < D; ++d) x0[r * D + d] = xd[r * D + d] + w[0][(r % T) * D + d];
    ops::ref::linear_forward<double>(qkv.data(), x0.data(), w[1].data(), w[2].data(), {rows, D, 3 * D});
    ops::ref::attention_forward<double>(att.data(), probs.data(), qkv.data(), as);
    ops::ref::linear_forward<double>(y.data(), att.data(), w[3].data(), w[4].data(), {rows, D, D});
    ops::ref::linear_forward<double>(z.data(), y.data(), w[5].data(), w[6].data(), {rows, D, O});
    double L = 0.0, S = 0.0;
    for (std::size_t i = 0; i < z.size(); ++i) L += z[i] * Rd[i], S += std::fabs(z[i] * Rd[i]);
    return std::pair{L, S};
  };
  forward();
  std::vector<std::vector<double>> dw(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) dw[i].assign(w[i].size(), 0.0);
  std::vector<double> dy(rows * D), datt(rows * D), dqkv(rows * 3 * D), dx0(rows * D);
  ops::ref::linear_backward<double>(dy.data(), dw[5].data(), dw[6].data(), Rd.data(), y.data(), w[5].data(), {rows, D, O});
  ops::ref::linear_backward<double>(datt.data(), dw[3].data(), dw[4].data(), dy.data(), att.data(), w[3].data(), {rows, D, D});
  ops::ref::attention_backward<double>(dqkv.data(), datt.data(), qkv.data(), probs.data(), as);
  ops::ref::linear_backward<double>(dx0.data(), dw[1].data(), dw[2].data(), dqkv.data(), x0.data(), w[1].data(),
                                    {rows, D, 3 * D});
  for (int r = 0; r < rows; ++r)
    for (int d = 0; d < D; ++d) dw[0][(r % T) * D + d] += dx0[r * D + d];
  // Central differences of the composition, every element of every tensor.
  const double h = 1e-6, eps = 0x1p-52;
  for (std::size_t i = 0; i < w.size(); ++i)
    for (std::size_t j = 0; j < w[i].size(); ++j) {
      const double saved = w[i][j];
      w[i][j] = saved + h;
      const auto plus = forward();
      w[i][j] = saved - h;
      const auto minus = forward();
      w[i][j] = saved;
      const double numeric = (plus.first - minus.first) / (2 * h), a = dw[i][j];
      const double floor = 8 * eps * std::max(plus.second, minus.second) / h;
      ASSERT_LE(std::fabs(a - numeric), 1e-6 * std::max(std::fabs(a), std::fabs(numeric)) + floor)
          << p.views()[i].name << "[" << j << "]";
    }
  forward();
  for (ops::IsaLevel level : levels_under_test()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    const float* out = model->forward(k, x.data(), N);
    double zmax = 0.0, zerr = 0.0;
    for (std::size_t i = 0; i < z.size(); ++i) zmax = std::max(zmax, std::fabs(z[i])), zerr = std::max(zerr, std::fabs(out[i] - z[i]));
    EXPECT_LE(zerr, 0x1p-10 * zmax);
    model->backward(k, x.data(), R.data(), N);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double gmax = 0.0, gerr = 0.0;
      for (std::size_t j = 0; j < w[i].size(); ++j)
        gmax = std::max(gmax, std::fabs(dw[i][j])), gerr = std::max(gerr, std::fabs(p.grad(int(i))[j] - dw[i][j]));
      EXPECT_LE(gerr, 0x1p-10 * gmax) << p.views()[i].name;
      EXPECT_GT(gmax, 0.0) << p.views()[i].name;
    }
  }
}

// ---- dropout -----------------------------------------------------------------------------------------
struct DropoutRun {
  std::vector<float> out;
};
DropoutRun run_dropout(Model& model, const ops::KernelTable& k, const std::vector<float>& x, int N, uint64_t seed,
                       int64_t step, const int64_t* ids) {
  model.set_step(seed, step, ids);
  const float* y = model.forward(k, x.data(), N);
  DropoutRun r;
  r.out.assign(y, y + x.size());
  return r;
}

TEST(ZooNnDropout, MaskIsAPureFunctionOfSeedStepAndSample) {
  const int N = 40, F = 300;
  const double p = 0.3;
  for (ops::IsaLevel level : levels_under_test()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    for (int threads : {1, 2}) {
      GraphBuilder g({F});
      g.add(std::make_unique<Dropout>("drop", p));
      auto model = g.build();
      model->set_threads(threads);
      model->reserve(N);
      const std::vector<float> x(std::size_t(N) * F, 1.0f);
      std::vector<int64_t> ids(N), reversed(N);
      for (int n = 0; n < N; ++n) ids[std::size_t(n)] = 1000 + 13 * n;
      for (int n = 0; n < N; ++n) reversed[std::size_t(n)] = ids[std::size_t(N - 1 - n)];
      const DropoutRun a = run_dropout(*model, k, x, N, 7, 5, ids.data());
      const DropoutRun again = run_dropout(*model, k, x, N, 7, 5, ids.data());
      EXPECT_EQ(a.out, again.out) << "same seed, step and samples: same mask";
      // The batch in reverse order, with its ids: every sample keeps its mask wherever it sits (and on
      // whichever thread's slice).
      const DropoutRun rev = run_dropout(*model, k, x, N, 7, 5, reversed.data());
      for (int n = 0; n < N; ++n)
        for (int e = 0; e < F; ++e)
          ASSERT_EQ(rev.out[std::size_t(N - 1 - n) * F + e], a.out[std::size_t(n) * F + e]) << n << " " << e;
      // Keep rate: K ~ Binomial(N F, 1 - p); 6 standard deviations (a false alarm below 1e-8).
      const float scale = float(1.0 / (1.0 - p));
      double kept = 0;
      for (float v : a.out) {
        ASSERT_TRUE(v == 0.0f || v == scale) << v;
        kept += v != 0.0f;
      }
      const double total = double(N) * F, sd = std::sqrt(total * p * (1 - p));
      EXPECT_NEAR(kept, total * (1 - p), 6 * sd);
      // Another step, seed or sample: a fresh mask. Two independent masks agree on an element with
      // probability p^2 + (1 - p)^2; the agreement count is binomial around that.
      const double agree_p = p * p + (1 - p) * (1 - p), agree_sd = std::sqrt(total * agree_p * (1 - agree_p));
      auto agreement = [&](const std::vector<float>& b) {
        double same = 0;
        for (std::size_t i = 0; i < b.size(); ++i) same += (a.out[i] != 0.0f) == (b[i] != 0.0f);
        return same;
      };
      std::vector<int64_t> shifted(ids);
      for (auto& id : shifted) id += 1;
      EXPECT_NEAR(agreement(run_dropout(*model, k, x, N, 7, 6, ids.data()).out), total * agree_p, 6 * agree_sd);
      EXPECT_NEAR(agreement(run_dropout(*model, k, x, N, 8, 5, ids.data()).out), total * agree_p, 6 * agree_sd);
      EXPECT_NEAR(agreement(run_dropout(*model, k, x, N, 7, 5, shifted.data()).out), total * agree_p, 6 * agree_sd);
      // Another dropout layer (another name) of the same model: its own mask for the same sample and step.
      GraphBuilder g2({F});
      g2.add(std::make_unique<Dropout>("encoder.layers.encoder_layer_1.mlp.2", p));
      auto other = g2.build();
      other->reserve(N);
      EXPECT_NEAR(agreement(run_dropout(*other, k, x, N, 7, 5, ids.data()).out), total * agree_p, 6 * agree_sd);
      // Eval mode: the identity.
      model->set_training(false);
      EXPECT_EQ(run_dropout(*model, k, x, N, 7, 5, ids.data()).out, x);
    }
  }
}

// The backward recomputes the forward's mask: a Linear in front receives din = dout * mask * scale, so its
// weight gradient with input 1 and dout 1 is the per-feature count of kept samples times the scale.
TEST(ZooNnDropout, BackwardUsesTheForwardMask) {
  const int N = 20, F = 50;
  const ops::KernelTable& k = ops::reference_kernels();
  for (int threads : {1, 2}) {
    GraphBuilder g({1});
    g.add(std::make_unique<Linear>("fc", 1, F));
    g.add(std::make_unique<Dropout>("drop", 0.5));
    auto model = g.build();
    model->set_threads(threads);
    model->reserve(N);
    ParameterSet& p = model->params();
    for (int f = 0; f < F; ++f) p.param(0)[f] = 1.0f, p.param(1)[f] = 0.0f;
    std::vector<int64_t> ids(N);
    for (int n = 0; n < N; ++n) ids[std::size_t(n)] = 77 * n + 3;
    model->set_step(11, 2, ids.data());
    const std::vector<float> x(N, 1.0f), dy(std::size_t(N) * F, 1.0f);
    const float* y = model->forward(k, x.data(), N);
    std::vector<float> kept(F, 0.0f);
    for (int n = 0; n < N; ++n)
      for (int f = 0; f < F; ++f) kept[std::size_t(f)] += y[std::size_t(n) * F + f];  // exact: 0s and 2s
    model->backward(k, x.data(), dy.data(), N);
    EXPECT_EQ(std::vector<float>(p.grad(0), p.grad(0) + F), kept) << threads;
  }
}

// ---- 1 vs 2 threads ------------------------------------------------------------------------------------
// A convolutional block: batch norm in training (two meeting points), ReLU6, a residual Add reading bn1's
// output twice (fan-out), dropout, flatten, a linear head.
std::unique_ptr<Model> cnn_graph() {
  GraphBuilder g({3, 4, 4});
  const int bn1 = g.add(std::make_unique<BatchNorm2d>("bn1", 3));
  const int act = g.add(std::make_unique<ReLU6>("relu6"));
  g.add(std::make_unique<Add>("add"), {act, bn1});
  g.add(std::make_unique<BatchNorm2d>("bn2", 3));
  g.add(std::make_unique<Dropout>("drop", 0.2));
  g.add(std::make_unique<Flatten>("flat"));
  g.add(std::make_unique<Linear>("fc", 48, 10));
  return g.build();
}

// A ViT encoder block: batch norm (the meeting point) on the patch grid, tokens, class token, position
// embedding, pre-norm attention and MLP with residual fan-out, the class token's head.
std::unique_ptr<Model> vit_graph() {
  GraphBuilder g({8, 2, 2});
  g.add(std::make_unique<BatchNorm2d>("bn", 8));
  g.add(std::make_unique<PatchTokens>("patches"));
  g.add(std::make_unique<ClassToken>("class_token", 8));
  const int x0 = g.add(std::make_unique<PositionEmbedding>("encoder.pos_embedding", 5, 8));
  g.add(std::make_unique<LayerNorm>("ln_1", 8, 1e-6));
  const int att = g.add(std::make_unique<MultiheadSelfAttention>("self_attention", 8, 2));
  const int x1 = g.add(std::make_unique<Add>("res1"), {att, x0});
  g.add(std::make_unique<LayerNorm>("ln_2", 8, 1e-6));
  g.add(std::make_unique<TokenLinear>("mlp.0", 8, 16, Init::uniform(std::sqrt(6.0 / 24)), Init::normal(1e-6)));
  g.add(std::make_unique<GELU>("gelu"));
  g.add(std::make_unique<Dropout>("mlp.2", 0.1));
  const int mlp = g.add(std::make_unique<TokenLinear>("mlp.3", 16, 8));
  g.add(std::make_unique<Add>("res2"), {mlp, x1});
  g.add(std::make_unique<LayerNorm>("ln", 8, 1e-6));
  g.add(std::make_unique<SelectToken>("cls", 0));
  g.add(std::make_unique<Linear>("head", 8, 10));
  return g.build();
}

struct StepResult {
  std::vector<float> logits, grads, buffers;
  std::vector<double> magnitude;  // sum over samples of |that sample's gradient contribution|
};

StepResult run_step(std::unique_ptr<Model> (*make)(), const ops::KernelTable& k, int threads, int N, bool magnitudes,
                    bool training) {
  auto model = make();
  model->init_parameters(5);
  model->set_training(training);
  model->set_threads(threads);
  model->reserve(N);
  Rng rng(9);
  const std::vector<float> x = random_vec(std::size_t(N) * shape_numel(model->input_shape()), rng, -1, 2);
  const std::vector<float> dlogits = random_vec(std::size_t(N) * 10, rng, -1, 1);
  std::vector<int64_t> ids(N);
  for (int n = 0; n < N; ++n) ids[std::size_t(n)] = 500 + 3 * n;
  model->set_step(21, 4, ids.data());
  StepResult r;
  const float* y = model->forward(k, x.data(), N);
  r.logits.assign(y, y + std::size_t(N) * 10);
  ParameterSet& p = model->params();
  const std::size_t np = p.size();
  if (magnitudes) {
    // The backward is linear in dlogits: sample n's contribution is the backward of its row alone.
    r.magnitude.assign(np, 0.0);
    for (int n = 0; n < N; ++n) {
      std::vector<float> one(dlogits.size(), 0.0f);
      for (int c = 0; c < 10; ++c) one[std::size_t(n) * 10 + c] = dlogits[std::size_t(n) * 10 + c];
      model->backward(k, x.data(), one.data(), N);
      for (std::size_t i = 0; i < np; ++i) r.magnitude[i] += std::fabs(p.grads()[i]);
    }
  }
  model->backward(k, x.data(), dlogits.data(), N);
  r.grads.assign(p.grads(), p.grads() + np);
  r.buffers.assign(p.buffers(), p.buffers() + p.buffer_floats());
  return r;
}

// Every per-sample computation is the same on any slice, so the logits and everything the whole-batch batch
// norms compute (running statistics, their parameter gradients) are bit for bit the same. The other
// parameter gradients are sums over the batch's rows (samples x tokens, at most 16 N here) taken in two
// groups instead of one: each sum is within gamma(n) sum|terms| of the exact one, so the two differ by at
// most 2 gamma(16 N) sum|terms|. sum|terms| is estimated by the sum over samples of |each sample's gradient|,
// floored by the largest such sum in the tensor: rows of one sample can cancel (the k part of in_proj_bias is
// exactly zero in exact arithmetic - softmax ignores a shift of a whole row of scores - so its float value is
// rounding of terms as large as the tensor's others). In eval mode batch norm runs on slices too, and its
// parameter gradients take the same bound.
TEST(ZooNnThreads, OneAndTwoThreadsAgree) {
  const int N = 20;  // slices of 16 and 4 samples
  for (ops::IsaLevel level : levels_under_test())
    for (bool training : {true, false}) {
      const ops::KernelTable& k = ops::kernels_for(level);
      for (auto [name, make] : {std::pair{"cnn", &cnn_graph}, std::pair{"vit", &vit_graph}}) {
        SCOPED_TRACE(std::string(ops::isa_name(level)) + " " + name + (training ? " training" : " eval"));
        const StepResult one = run_step(make, k, 1, N, true, training), two = run_step(make, k, 2, N, false, training);
        EXPECT_EQ(one.logits, two.logits);
        EXPECT_EQ(one.buffers, two.buffers);
        ASSERT_EQ(one.grads.size(), two.grads.size());
        auto model = make();
        int bad = 0;
        for (const ParamView& v : model->params().views()) {
          const bool batch_norm = training && v.name.rfind("bn", 0) == 0;
          double floor = 0.0;
          for (std::size_t j = v.offset; j < v.offset + v.numel; ++j) floor = std::max(floor, one.magnitude[j]);
          for (std::size_t j = v.offset; j < v.offset + v.numel; ++j) {
            const double tol = batch_norm ? 0.0 : 2 * gamma(16.0 * N) * std::max(one.magnitude[j], floor);
            if (!(std::fabs(double(one.grads[j]) - two.grads[j]) <= tol) && bad++ < 5)
              ADD_FAILURE() << v.name << "[" << j - v.offset << "]: 1 thread " << one.grads[j] << ", 2 threads "
                            << two.grads[j] << " (tolerance " << tol << ")";
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
}

TEST(ZooNnThreads, StepsAllocateNothing) {
  const int N = 20;
  for (ops::IsaLevel level : levels_under_test()) {
    const ops::KernelTable& k = ops::kernels_for(level);
    for (auto make : {&cnn_graph, &vit_graph})
      for (int threads : {1, 2}) {
        auto model = make();
        model->init_parameters(1);
        model->set_threads(threads);
        model->reserve(N);
        Rng rng(2);
        const std::vector<float> x = random_vec(std::size_t(N) * shape_numel(model->input_shape()), rng, -1, 1);
        const std::vector<float> dlogits = random_vec(std::size_t(N) * 10, rng, -1, 1);
        std::vector<int64_t> ids(N, 0);
        for (int step = 0; step < 3; ++step) {
          model->set_step(1, step, ids.data());
          if (step == 2) {
            g_allocs = 0;
            g_count_allocs = true;
          }
          model->forward(k, x.data(), N);
          model->backward(k, x.data(), dlogits.data(), N);
          g_count_allocs = false;
        }
        EXPECT_EQ(g_allocs.load(), 0) << ops::isa_name(level) << " threads " << threads;
      }
  }
}

}  // namespace
}  // namespace ringtrain::nn
