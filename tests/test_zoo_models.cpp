// The zoo's graphs as PyTorch sees them and as the trainer runs them: parameter and buffer counts of
// the torchvision models (printed by torchvision 0.14 for these configurations), names PyTorch uses,
// initialisation statistics, 1 vs 2 threads (the same losses within a step's float32 rounding; two
// 2-thread runs bit-identical), steps that allocate nothing, and eval mode using the running statistics.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

#include "count_allocations.h"

using namespace ringtrain;

namespace {

constexpr int kClasses = 10;

struct Counts {
  const char* model;
  std::size_t params, float_buffers, counters;
};
// sum(p.numel() for p in model.parameters()), the F32 buffers and the num_batches_tracked counters of
// scripts/zoo_torch.py's models (torchvision 0.14.1).
const Counts kCounts[] = {
    {"lenet5", 61706, 0, 0},
    {"resnet18", 11175370, 9600, 20},
    {"mobilenet_v2", 2236106, 34112, 52},
    {"vit", 1199882, 0, 0},
};

TEST(ZooModels, ParameterAndBufferCountsAreTorchvisions) {
  for (const Counts& c : kCounts) {
    auto m = nn::make_model(c.model);
    EXPECT_EQ(m->name(), c.model);
    EXPECT_EQ(m->params().count(), c.params) << c.model;
    std::size_t floats = 0, counters = 0;
    for (const auto& b : m->params().buffer_views()) (b.int64 ? counters : floats) += b.numel;
    EXPECT_EQ(floats, c.float_buffers) << c.model;
    EXPECT_EQ(counters, c.counters) << c.model;
    EXPECT_EQ(m->num_classes(), kClasses) << c.model;
  }
}

TEST(ZooModels, StateDictNames) {
  auto has = [](const nn::Model& m, const std::string& name) {
    for (const auto& v : m.params().views())
      if (v.name == name) return true;
    for (const auto& b : m.params().buffer_views())
      if (b.name == name) return true;
    return false;
  };
  auto r = nn::make_model("resnet18");
  for (const char* n : {"conv1.weight", "bn1.running_mean", "layer1.0.bn1.num_batches_tracked",
                        "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_var", "fc.bias"})
    EXPECT_TRUE(has(*r, n)) << n;
  EXPECT_FALSE(has(*r, "conv1.bias"));
  auto mb = nn::make_model("mobilenet_v2");
  for (const char* n : {"features.0.0.weight", "features.1.conv.0.0.weight", "features.1.conv.1.weight",
                        "features.2.conv.3.running_mean", "features.18.1.weight", "classifier.1.weight"})
    EXPECT_TRUE(has(*mb, n)) << n;
  auto v = nn::make_model("vit");
  for (const char* n : {"class_token", "conv_proj.bias", "encoder.pos_embedding",
                        "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
                        "encoder.layers.encoder_layer_5.mlp.3.bias", "encoder.ln.weight", "heads.head.weight"})
    EXPECT_TRUE(has(*v, n)) << n;
  EXPECT_EQ(v->params().view("encoder.layers.encoder_layer_0.self_attention.in_proj_weight").shape,
            (Shape{384, 128}));
  EXPECT_EQ(v->params().view("class_token").shape, (Shape{1, 1, 128}));
  EXPECT_EQ(mb->params().view("features.2.conv.1.0.weight").shape, (Shape{96, 1, 3, 3}));  // depthwise
}

// The initialisation torchvision gives each tensor, by its sample statistics.
TEST(ZooModels, InitialisationFollowsTorchvision) {
  auto stats = [](const nn::Model& m, const std::string& name) {
    const auto& v = m.params().view(name);
    const float* p = m.params().params() + v.offset;
    double sum = 0, sq = 0, maxabs = 0;
    for (std::size_t i = 0; i < v.numel; ++i) {
      sum += p[i];
      sq += double(p[i]) * p[i];
      maxabs = std::max(maxabs, std::abs(double(p[i])));
    }
    const double mean = sum / double(v.numel);
    return std::array<double, 3>{mean, std::sqrt(sq / double(v.numel) - mean * mean), maxabs};
  };
  auto r = nn::make_model("resnet18");
  r->init_parameters(0);
  // kaiming_normal_(fan_out, relu): std sqrt(2 / (256 * 9)) for layer3's 3x3 convs.
  EXPECT_NEAR(stats(*r, "layer3.1.conv1.weight")[1], std::sqrt(2.0 / (256 * 9)), 0.01 * std::sqrt(2.0 / (256 * 9)));
  EXPECT_EQ(stats(*r, "layer3.1.bn1.weight")[0], 1.0);
  EXPECT_LE(stats(*r, "fc.weight")[2], 1.0 / std::sqrt(512.0));  // nn.Linear: U(+-1/sqrt(fan_in))
  auto v = nn::make_model("vit");
  v->init_parameters(0);
  EXPECT_NEAR(stats(*v, "encoder.pos_embedding")[1], 0.02, 0.001);
  EXPECT_EQ(stats(*v, "heads.head.weight")[2], 0.0);
  EXPECT_EQ(stats(*v, "class_token")[2], 0.0);
  // xavier_uniform_: U(+-sqrt(6 / (128 + 512))) for the MLP's first linear; biases N(0, 1e-6).
  EXPECT_LE(stats(*v, "encoder.layers.encoder_layer_2.mlp.0.weight")[2], std::sqrt(6.0 / 640));
  EXPECT_NEAR(stats(*v, "encoder.layers.encoder_layer_2.mlp.0.weight")[1], std::sqrt(6.0 / 640) / std::sqrt(3.0), 0.002);
  EXPECT_LT(stats(*v, "encoder.layers.encoder_layer_2.mlp.0.bias")[2], 1e-5);
  auto mb = nn::make_model("mobilenet_v2");
  mb->init_parameters(0);
  EXPECT_NEAR(stats(*mb, "classifier.1.weight")[1], 0.01, 0.0005);
}

struct TrainRun {
  std::vector<float> losses, params, first_grads;
};

// `steps` SGD steps of batch 24 (slices of 16 and 8 on 2 threads) on random images.
TrainRun train(const std::string& name, int threads, int steps) {
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  auto m = nn::make_model(name);
  m->init_parameters(7);
  m->set_threads(threads);
  const int N = 24;
  m->reserve(N);
  Rng rng(11);
  std::vector<float> x(std::size_t(N) * 784);
  std::vector<uint8_t> y(N);
  // SGD: Adam's first steps move every weight by +-lr whatever its gradient's size, so a gradient that is
  // float noise around zero would flip a whole update; SGD's updates follow the gradients' differences.
  optim::SgdOptions so;
  so.lr = 0.05f;
  so.momentum = 0.0f;
  optim::Sgd sgd(m->params().size(), so);
  std::vector<float> probs(std::size_t(N) * kClasses), dlogits(probs.size());
  TrainRun run;
  run.losses.reserve(std::size_t(steps));
  for (int s = 0; s < steps; ++s) {
    for (auto& p : x) p = rng.uniform();
    for (auto& l : y) l = uint8_t(rng.below(kClasses));
    m->set_step(0, s, nullptr);
    if (s == steps - 1) {
      g_allocs = 0;
      g_count_allocs = true;
    }
    const float* logits = m->forward(k, x.data(), N);
    run.losses.push_back(k.softmax_xent_forward(probs.data(), logits, y.data(), N, kClasses));
    k.softmax_xent_backward(dlogits.data(), probs.data(), y.data(), N, kClasses, 1.0f / N);
    m->backward(k, x.data(), dlogits.data(), N);
    if (s == 0) run.first_grads.assign(m->params().grads(), m->params().grads() + m->params().size());
    sgd.step(m->params().params(), m->params().grads());
    g_count_allocs = false;
  }
  EXPECT_EQ(g_allocs.load(), 0) << name << " with " << threads << " thread(s): allocations in a step";
  run.params.assign(m->params().params(), m->params().params() + m->params().size());
  return run;
}

TEST(ZooModels, TwoThreadsAgreeWithOneAndWithThemselves) {
  for (const char* name : {"resnet18", "mobilenet_v2", "vit"}) {
    SCOPED_TRACE(name);
    const TrainRun one = train(name, 1, 3), two = train(name, 2, 3), again = train(name, 2, 3);
    EXPECT_EQ(two.params, again.params) << "two 2-thread runs differ";
    // The forward is the same per sample (batch norm runs on the whole batch in one thread) ...
    EXPECT_EQ(one.losses[0], two.losses[0]) << "the first forward differs";
    // ... and the first gradients differ only in the order sums are added (the slices' weight gradients;
    // the input gradients of convs split by output channels, summed over their parts): a few float32
    // ulps of the tensor's scale. Tensors whose exact gradient is zero (a batch norm's bias feeding
    // another batch norm through a bias-free conv: the shift is normalised away) hold only rounding
    // noise, so the scale is at least 1e-3 of the model's largest gradient. mobilenet_v2's early batch
    // norms amplify such differences: one thread at avx2 against avx512 differs by 2.4e-5 in
    // features.1.conv.2.bias (2026-12-05), as two threads against one do (2.8e-5), so it is held to 1e-4.
    auto m = nn::make_model(name);
    double largest = 0;
    for (float g : one.first_grads) largest = std::max(largest, double(std::abs(g)));
    for (const auto& v : m->params().views()) {
      double diff = 0, scale = 1e-3 * largest;
      for (std::size_t i = 0; i < v.numel; ++i) {
        diff = std::max(diff, double(std::abs(one.first_grads[v.offset + i] - two.first_grads[v.offset + i])));
        scale = std::max(scale, double(std::abs(one.first_grads[v.offset + i])));
      }
      EXPECT_LE(diff / scale, std::string(name) == "mobilenet_v2" ? 1e-4 : 1e-5) << "first gradient of " << v.name;
    }
    // Later steps: resnet18 and vit carry the few-ulp difference on smoothly. mobilenet_v2 at 28x28 is
    // ill-conditioned (its last stages run batch norm over 1x1 maps): a 1e-7 change of its weights moves
    // its gradients by ~1e-3 on any two kernel tables (avx2 vs scalar alike), so only its first step is held.
    if (std::string(name) != "mobilenet_v2")
      for (std::size_t s = 1; s < one.losses.size(); ++s) EXPECT_NEAR(two.losses[s], one.losses[s], 1e-4 * one.losses[s]);
  }
}

TEST(ZooModels, EvalModeUsesRunningStatistics) {
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  auto m = nn::make_model("resnet18");
  m->init_parameters(1);
  m->reserve(4);
  std::vector<float> a(4 * 784), b(4 * 784);
  Rng rng(2);
  for (auto& p : a) p = rng.uniform();
  b = a;
  for (int i = 0; i < 784; ++i) b[3 * 784 + i] = 1.0f - a[3 * 784 + i];  // another last sample
  m->set_training(false);
  std::vector<float> la(m->forward(k, a.data(), 4), m->forward(k, a.data(), 4) + 40);
  std::vector<float> lb(m->forward(k, b.data(), 4), m->forward(k, b.data(), 4) + 40);
  // In eval mode a sample's logits do not depend on the rest of the batch ...
  EXPECT_EQ(std::vector<float>(la.begin(), la.begin() + 30), std::vector<float>(lb.begin(), lb.begin() + 30));
  // ... in training mode they do (batch statistics), and the running statistics move.
  m->set_training(true);
  const float* ta = m->forward(k, a.data(), 4);
  std::vector<float> tla(ta, ta + 40);
  const float* tb = m->forward(k, b.data(), 4);
  EXPECT_NE(std::vector<float>(tla.begin(), tla.begin() + 30), std::vector<float>(tb, tb + 30));
  EXPECT_EQ(m->params().counters()[0], 2);
}

}  // namespace
