// LeNet-5 steps with the bf16 and the fp32 kernel tables: the chained conv1 -> conv2 hand-over (blocked
// activations, nn::Conv2dReluPool::chain_to, ops/conv_pool.h) gives the same bits as the same layers unchained,
// for whole and partial blocks and with threads (whose slices decide the layout each); and a bf16 step
// allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/conv_relu_pool.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"
#include "ringtrain/optim/optimizer.h"

#include "count_allocations.h"

namespace ringtrain {
namespace {

// make_lenet5() without the conv1 -> conv2 chain.
std::unique_ptr<nn::Model> unchained_lenet5() {
  nn::LayerList layers;
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv1", 1, 6, 5, 1, 2));
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv2", 6, 16, 5, 1, 0));
  layers.push_back(std::make_unique<nn::Linear>("fc1", 400, 120));
  layers.push_back(std::make_unique<nn::ReLU>("relu3"));
  layers.push_back(std::make_unique<nn::Linear>("fc2", 120, 84));
  layers.push_back(std::make_unique<nn::ReLU>("relu4"));
  layers.push_back(std::make_unique<nn::Linear>("fc3", 84, 10));
  return std::make_unique<nn::Model>(Shape{1, 28, 28}, std::move(layers));
}

struct Batch {
  std::vector<float> x;
  std::vector<uint8_t> y;
  explicit Batch(int n) : x(std::size_t(n) * 784), y(n) {
    Rng rng(7);
    for (auto& v : x) v = rng.uniform();
    for (auto& l : y) l = uint8_t(rng.below(10));
  }
};

// One forward + backward; returns the logits, the model keeps the gradients.
std::vector<float> step(nn::Model& m, const ops::KernelTable& k, const Batch& b, int n) {
  std::vector<float> probs(std::size_t(n) * 10), dlogits(probs.size());
  const float* logits = m.forward(k, b.x.data(), n);
  std::vector<float> out(logits, logits + probs.size());
  k.softmax_xent_forward(probs.data(), logits, b.y.data(), n, 10);
  k.softmax_xent_backward(dlogits.data(), probs.data(), b.y.data(), n, 10, 1.0f / float(n));
  m.backward(k, b.x.data(), dlogits.data(), n);
  return out;
}

std::vector<ops::IsaLevel> levels() {
  const char* env = std::getenv("RINGTRAIN_ISA");
  if (env && *env) return {ops::parse_isa(env)};
  return ops::supported_isas();
}

void expect_chained_same_bits(ops::Precision precision) {
  for (ops::IsaLevel level : levels()) {
    const ops::KernelTable& k = ops::kernels_for(level, precision);
    for (int threads : {1, 2})
      for (int n : {64, 16, 50, 8, 1}) {  // whole blocks, one block (of 16, of 8), a partial last block, one sample
        SCOPED_TRACE(std::string(ops::isa_name(level)) + " threads " + std::to_string(threads) + " batch " +
                     std::to_string(n));
        auto chained = nn::make_lenet5(), plain = unchained_lenet5();
        for (auto* m : {chained.get(), plain.get()}) {
          m->init_parameters(5);
          m->set_threads(threads);
          m->reserve(64);
        }
        const Batch b(n);
        const auto l1 = step(*chained, k, b, n), l2 = step(*plain, k, b, n);
        EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float))) << "logits differ";
        const std::size_t g = chained->params().size();
        ASSERT_EQ(g, plain->params().size());
        EXPECT_EQ(0, std::memcmp(chained->params().grads(), plain->params().grads(), g * sizeof(float)))
            << "gradients differ";
      }
  }
}

TEST(Bf16Model, ChainedConvLayersGiveTheSameBitsAsUnchained) { expect_chained_same_bits(ops::Precision::Bf16); }

// The fp32 tables hand the activation over blocked too ([N/L][features][L] fp32, L their vector width).
TEST(Fp32Model, ChainedConvLayersGiveTheSameBitsAsUnchained) { expect_chained_same_bits(ops::Precision::Fp32); }

TEST(Bf16Model, StepsAllocateNothing) {
  for (ops::IsaLevel level : levels()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(ops::isa_name(level)) + " threads " + std::to_string(threads));
      const ops::KernelTable& k = ops::kernels_for(level, ops::Precision::Bf16);
      auto model = nn::make_lenet5();
      model->init_parameters(3);
      model->set_threads(threads);
      model->reserve(64);
      optim::Adam adam(model->params().size(), {});
      adam.use_kernels(k);
      const Batch b(64);
      std::vector<float> probs(64 * 10), dlogits(probs.size());
      for (int s = 0; s < 3; ++s) {
        if (s == 2) {
          g_allocs = 0;
          g_count_allocs = true;
        }
        const float* logits = model->forward(k, b.x.data(), 64);
        k.softmax_xent_forward(probs.data(), logits, b.y.data(), 64, 10);
        k.softmax_xent_backward(dlogits.data(), probs.data(), b.y.data(), 64, 10, 1.0f / 64);
        model->backward(k, b.x.data(), dlogits.data(), 64);
        adam.step(model->params().params(), model->params().grads());
        g_count_allocs = false;
      }
      EXPECT_EQ(g_allocs.load(), 0) << "allocations in the third bf16 step";
    }
  }
}

}  // namespace
}  // namespace ringtrain
