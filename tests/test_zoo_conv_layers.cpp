// The zoo's convolution and pooling layers: Conv2d with groups / without bias (parameter names, shapes,
// fan-in, PyTorch's Init), MaxPool2d with stride and padding, AdaptiveAvgPool2d; a small chain of them
// run on 1 and 2 threads (Model::set_threads); convs whose weight gradient the threads split by output
// channels (Conv2d::splits_by_outputs) on 1, 2 and 3 threads, their input gradients included; steps allocate
// nothing after the first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "count_allocations.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/batch_norm.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/nn/pool.h"

namespace ringtrain::nn {
namespace {

// stem (general GEMM path) -> max-pool 3/2/1 -> depthwise -> ReLU -> pointwise -> grouped strided conv ->
// global average pool -> linear: every new layer and every conv route of the fast kernels.
std::unique_ptr<Model> small_chain() {
  LayerList layers;
  layers.push_back(std::make_unique<Conv2d>("stem", 1, 24, 3, 1, 1, 1, false));
  layers.push_back(std::make_unique<MaxPool2d>("pool", 3, 2, 1));
  layers.push_back(std::make_unique<Conv2d>("dw", 24, 24, 3, 1, 1, 24, false));
  layers.push_back(std::make_unique<ReLU>("relu"));
  layers.push_back(std::make_unique<Conv2d>("pw", 24, 40, 1));
  layers.push_back(std::make_unique<Conv2d>("g2", 40, 20, 3, 2, 1, 2));
  layers.push_back(std::make_unique<AdaptiveAvgPool2d>("gap"));
  layers.push_back(std::make_unique<Linear>("fc", 20, 10));
  return std::make_unique<Model>(Shape{1, 12, 12}, std::move(layers));
}

TEST(ZooConvLayers, ShapesNamesAndFanIn) {
  auto m = small_chain();
  const ParameterSet& p = m->params();
  EXPECT_EQ(m->value_shape(1), (Shape{24, 12, 12}));
  EXPECT_EQ(m->value_shape(2), (Shape{24, 6, 6}));
  EXPECT_EQ(m->value_shape(6), (Shape{20, 3, 3}));
  EXPECT_EQ(m->value_shape(7), (Shape{20, 1, 1}));
  std::vector<std::string> names;
  for (const ParamView& v : p.views()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"stem.weight", "dw.weight", "pw.weight", "pw.bias", "g2.weight",
                                             "g2.bias", "fc.weight", "fc.bias"}));
  EXPECT_EQ(p.view("stem.weight").shape, (Shape{24, 1, 3, 3}));
  EXPECT_EQ(p.view("dw.weight").shape, (Shape{24, 1, 3, 3}));
  EXPECT_EQ(p.view("dw.weight").fan_in, 9);
  EXPECT_EQ(p.view("g2.weight").shape, (Shape{20, 20, 3, 3}));
  EXPECT_EQ(p.view("g2.weight").fan_in, 180);  // C/groups * R * S, as PyTorch
  EXPECT_EQ(p.view("g2.bias").fan_in, 180);
  // macs: C/groups per output
  EXPECT_DOUBLE_EQ(m->layers()[2]->forward_macs(), 24.0 * 36 * 9);
  EXPECT_DOUBLE_EQ(m->layers()[5]->forward_macs(), 20.0 * 9 * 20 * 9);
}

TEST(ZooConvLayers, InitIsPassedThrough) {
  LayerList layers;
  layers.push_back(std::make_unique<Conv2d>("c", 4, 8, 3, 1, 1, 2, true, Init::normal(0.5), Init::constant(0.25)));
  Model m(Shape{4, 5, 5}, std::move(layers));
  EXPECT_EQ(m.params().view("c.weight").init.kind, Init::Normal);
  EXPECT_EQ(m.params().view("c.weight").init.a, 0.5);
  EXPECT_EQ(m.params().view("c.bias").init.kind, Init::Constant);
  m.init_parameters(1);
  const float* b = m.params().param(1);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], 0.25f);
}

TEST(ZooConvLayers, BadArgumentsThrow) {
  EXPECT_THROW(Conv2d("c", 6, 9, 3, 1, 1, 2), Error);  // 2 does not divide 9
  EXPECT_THROW(MaxPool2d("p", 3, 2, 2), Error);       // pad > kernel / 2
  LayerList layers;
  layers.push_back(std::make_unique<MaxPool2d>("p", 2));  // LeNet's rule kept: 7 is not a multiple of 2
  EXPECT_THROW(Model(Shape{1, 7, 8}, std::move(layers)), Error);
}

struct StepResult {
  std::vector<float> logits, grads;
};

StepResult step(Model& m, const ops::KernelTable& k, int threads, int N) {
  m.set_threads(threads);
  m.reserve(N);
  Rng rng(5);
  std::vector<float> x(std::size_t(N) * 144), dl(std::size_t(N) * 10);
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : dl) v = rng.uniform(-1.0f, 1.0f);
  StepResult r;
  const float* logits = m.forward(k, x.data(), N);
  r.logits.assign(logits, logits + dl.size());
  m.backward(k, x.data(), dl.data(), N);
  r.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
  return r;
}

// Forward is per sample, so the logits are the same bits on any thread count; the parameter gradients sum
// the slices in slice order: bit-identical where one slice holds the whole batch (16 samples: slice 1 is
// empty and must write zeros), and run to run on 2 threads; otherwise within the summation bound.
TEST(ZooConvLayers, OneAndTwoThreads) {
  for (ops::IsaLevel level : ops::supported_isas()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    auto m = small_chain();
    m->init_parameters(3);
    for (int N : {16, 40}) {
      SCOPED_TRACE("batch " + std::to_string(N));
      std::fill_n(m->params().grads(), m->params().size(), NAN);
      const StepResult one = step(*m, k, 1, N);
      std::fill_n(m->params().grads(), m->params().size(), NAN);
      const StepResult two = step(*m, k, 2, N);
      std::fill_n(m->params().grads(), m->params().size(), NAN);
      const StepResult again = step(*m, k, 2, N);
      EXPECT_EQ(0, std::memcmp(one.logits.data(), two.logits.data(), one.logits.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(two.grads.data(), again.grads.data(), two.grads.size() * sizeof(float)));
      for (const ParamView& v : m->params().views()) {
        SCOPED_TRACE(v.name);
        double largest = 0.0;
        for (std::size_t i = 0; i < v.numel; ++i) largest = std::max(largest, double(std::fabs(one.grads[v.offset + i])));
        for (std::size_t i = 0; i < v.numel; ++i) {
          const float a = one.grads[v.offset + i], b = two.grads[v.offset + i];
          ASSERT_FALSE(std::isnan(a) || std::isnan(b)) << "element " << i << " not written";
          if (N == 16) {
            EXPECT_EQ(a, b) << "element " << i;
          } else {
            // Two summation orders of the same terms. Only a sanity bound here (1e-4 of the tensor's largest
            // gradient, about 2 gamma(n) for the ~1e3-term sums): the derived per-op bounds are checked by
            // test_zoo_conv_kernels.
            EXPECT_NEAR(a, b, 1e-4 * largest) << "element " << i;
          }
        }
      }
    }
  }
}

// Two convs with weights larger than their batch's input, each followed by batch norm (a whole-batch layer),
// so each heads a sliced run and the threads split its weight gradient by output channels: the first reads
// the model's input (no input gradient), the second has 96 output channels (parts of 64 and 32 on 2 threads,
// 32 each on 3).
std::unique_ptr<Model> by_outputs_chain() {
  LayerList layers;
  layers.push_back(std::make_unique<Conv2d>("head", 64, 80, 3, 1, 1, 1, false));
  layers.push_back(std::make_unique<BatchNorm2d>("bn1", 80));
  layers.push_back(std::make_unique<ReLU>("relu"));
  layers.push_back(std::make_unique<Conv2d>("tail", 80, 96, 3, 1, 1));
  layers.push_back(std::make_unique<BatchNorm2d>("bn2", 96));
  layers.push_back(std::make_unique<AdaptiveAvgPool2d>("gap"));
  layers.push_back(std::make_unique<Linear>("fc", 96, 10));
  return std::make_unique<Model>(Shape{64, 2, 2}, std::move(layers));
}

std::size_t x_size(int N) { return std::size_t(N) * 256; }  // by_outputs_chain's input, 64 x 2 x 2 a sample

TEST(ZooConvLayers, WeightGradientSplitByOutputChannels) {
  for (ops::IsaLevel level : ops::supported_isas()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    for (int N : {17, 40}) {
      SCOPED_TRACE("batch " + std::to_string(N));
      std::vector<float> logits_of[4], input_grad_of[4];
      auto run = [&](int threads) {
        auto m = by_outputs_chain();
        m->init_parameters(6);
        m->set_threads(threads);
        m->set_input_gradient(true);  // the head's input gradient too: its parts' shares, added per slice
        m->reserve(N);
        if (threads > 1) {
          EXPECT_TRUE(m->layers()[0]->splits_by_outputs(N, threads));
          EXPECT_TRUE(m->layers()[3]->splits_by_outputs(N, threads));
        }
        Rng rng(8);
        std::vector<float> x(x_size(N)), dl(std::size_t(N) * 10);
        for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
        for (auto& v : dl) v = rng.uniform(-1.0f, 1.0f);
        std::fill_n(m->params().grads(), m->params().size(), NAN);
        const float* logits = m->forward(k, x.data(), N);
        logits_of[threads].assign(logits, logits + dl.size());
        m->backward(k, x.data(), dl.data(), N);
        input_grad_of[threads].assign(m->input_grad(), m->input_grad() + x.size());
        return std::vector<float>(m->params().grads(), m->params().grads() + m->params().size());
      };
      const std::vector<float> one = run(1), two = run(2), again = run(2), three = run(3);
      // Each output channel's sums are the same on any split (the convs' channels and batch norm's alike).
      EXPECT_EQ(logits_of[1], logits_of[2]);
      EXPECT_EQ(logits_of[1], logits_of[3]);
      // (memcmp: the padding between tensors stays NaN, which == would call different)
      EXPECT_EQ(0, std::memcmp(two.data(), again.data(), two.size() * sizeof(float))) << "two 2-thread runs differ";
      // The input gradient: the parts' shares of the head's 80 output channels summed in part order, the
      // same terms as one thread's single sum (80 x 9 of them an element: two orders differ by at most
      // 2 n u of the terms' absolute sum; these random terms' sum is ~sqrt(n) of the largest element).
      const double kInputGradBound = 2.0 * 720 * 0x1p-24 * std::sqrt(720.0);
      double largest_dx = 0.0;
      for (float g : input_grad_of[1]) largest_dx = std::max(largest_dx, double(std::fabs(g)));
      ASSERT_GT(largest_dx, 0.0);
      for (std::size_t i = 0; i < x_size(N); ++i)
        for (int threads : {2, 3}) {
          ASSERT_FALSE(std::isnan(input_grad_of[threads][i])) << "input gradient element " << i << " not written";
          EXPECT_NEAR(input_grad_of[threads][i], input_grad_of[1][i], kInputGradBound * largest_dx)
              << "input gradient element " << i << ", " << threads << " threads";
        }
      auto m = by_outputs_chain();
      for (const ParamView& v : m->params().views()) {
        SCOPED_TRACE(v.name);
        double largest = 0.0;
        for (std::size_t i = 0; i < v.numel; ++i) largest = std::max(largest, double(std::fabs(one[v.offset + i])));
        for (std::size_t i = 0; i < v.numel; ++i) {
          ASSERT_FALSE(std::isnan(two[v.offset + i]) || std::isnan(three[v.offset + i])) << "element " << i;
          EXPECT_NEAR(two[v.offset + i], one[v.offset + i], 1e-4 * largest) << "element " << i;
          EXPECT_NEAR(three[v.offset + i], one[v.offset + i], 1e-4 * largest) << "element " << i;
        }
      }
    }
  }
}

TEST(ZooConvLayers, StepsAllocateNothing) {
  for (int threads : {1, 2}) {
    const ops::KernelTable& k = ops::kernels_for(ops::detect_isa());
    auto m = small_chain();
    m->init_parameters(4);
    m->set_threads(threads);
    m->reserve(32);
    std::vector<float> x(32 * 144, 0.5f), dl(32 * 10, 0.01f);
    for (int s = 0; s < 3; ++s) {
      if (s == 2) {
        g_allocs = 0;
        g_count_allocs = true;
      }
      m->forward(k, x.data(), 32);
      m->backward(k, x.data(), dl.data(), 32);
      g_count_allocs = false;
    }
    EXPECT_EQ(g_allocs.load(), 0) << "threads " << threads;
  }
}

}  // namespace
}  // namespace ringtrain::nn
