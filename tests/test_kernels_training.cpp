// End-to-end checks of the fast kernels inside the model: 50 Adam steps of LeNet-5 with every ISA
// level give the reference's loss curve; --threads T is deterministic and agrees with one thread;
// the gradient hook still fires per parameter-owning layer, last first; a step allocates nothing.
//
// Tolerance of the loss curve, derived: one step's float results differ from the reference by at most
// gamma(n) relative, n the longest reduction of the step (conv1's weight gradient sums batch x 28 x 28
// products). Adam turns a gradient error into a parameter error of the same relative size, and
// errors of successive steps add up at most linearly (to first order), so after t steps
// |loss_isa(t) - loss_ref(t)| <= (t + 1) gamma(n) |loss_ref(t)|.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

#include "count_allocations.h"

namespace ringtrain {
namespace {

constexpr int kBatch = 32, kBatches = 4, kSteps = 50, kClasses = 10, kImages = 512;
constexpr double kU = 1.0 / 16777216.0;

struct Data {
  std::vector<float> x;  // kImages images in [0, 1); step s uses batch (s % kBatches) of its size
  std::vector<uint8_t> y;
  Data() {
    Rng rng(42);
    x.resize(std::size_t(kImages) * 784);
    y.resize(std::size_t(kImages));
    // Noise plus a bright 5x10 bar whose place depends on the class: learnable in a few dozen steps.
    for (std::size_t i = 0; i < y.size(); ++i) {
      y[i] = uint8_t(rng.below(kClasses));
      float* img = x.data() + i * 784;
      for (int p = 0; p < 784; ++p) img[p] = 0.3f * rng.uniform();
      for (int h = 0; h < 5; ++h)
        for (int w = 0; w < 10; ++w) img[(2 + (y[i] % 5) * 5 + h) * 28 + 4 + (y[i] / 5) * 12 + w] = 1.0f;
    }
  }
};

struct TrainRun {
  std::vector<float> losses;
  std::vector<float> params;
};

TrainRun train(const ops::KernelTable& k, int threads, int steps = kSteps, int batch = kBatch) {
  if (batch * kBatches > kImages) throw Error("test: batch too large for the synthetic set");
  static const Data data;
  auto model = nn::make_lenet5();
  model->init_parameters(7);
  model->set_threads(threads);
  model->reserve(batch);
  optim::Adam adam(model->params().size(), {});
  std::vector<float> probs(std::size_t(batch) * kClasses), dlogits(probs.size());
  TrainRun run;
  for (int step = 0; step < steps; ++step) {
    const float* x = data.x.data() + std::size_t(step % kBatches) * batch * 784;
    const uint8_t* y = data.y.data() + std::size_t(step % kBatches) * batch;
    const float* logits = model->forward(k, x, batch);
    run.losses.push_back(k.softmax_xent_forward(probs.data(), logits, y, batch, kClasses));
    k.softmax_xent_backward(dlogits.data(), probs.data(), y, batch, kClasses, 1.0f / float(batch));
    model->backward(k, x, dlogits.data(), batch);
    adam.step(model->params().params(), model->params().grads());
  }
  run.params.assign(model->params().params(), model->params().params() + model->params().size());
  return run;
}

double gamma(double n) { return n * kU / (1.0 - n * kU); }

// Every level this CPU runs, or only ref and RINGTRAIN_ISA's level when it is set.
std::vector<ops::IsaLevel> levels_under_test() {
  const char* env = std::getenv("RINGTRAIN_ISA");
  if (env && *env) {
    const ops::IsaLevel forced = ops::parse_isa(env);
    if (forced == ops::IsaLevel::Ref) return {ops::IsaLevel::Ref};
    return {ops::IsaLevel::Ref, forced};
  }
  return ops::supported_isas();
}

std::vector<ops::IsaLevel> fast_levels() {
  std::vector<ops::IsaLevel> out;
  for (ops::IsaLevel l : levels_under_test())
    if (l != ops::IsaLevel::Ref) out.push_back(l);
  return out;
}

TEST(KernelTraining, EveryIsaFollowsTheReferenceLossCurve) {
  const TrainRun ref = train(ops::reference_kernels(), 1);
  ASSERT_LT(ref.losses.back(), 0.8f * ref.losses.front()) << "the reference run did not learn";
  const double n = double(kBatch) * 28 * 28;
  for (ops::IsaLevel level : fast_levels()) {
    SCOPED_TRACE(ops::isa_name(level));
    const TrainRun run = train(ops::kernels_for(level), 1);
    double worst = 0.0;
    for (int t = 0; t < kSteps; ++t) {
      const double tol = (t + 1) * gamma(n) * std::fabs(ref.losses[t]);
      const double err = std::fabs(double(run.losses[t]) - ref.losses[t]);
      worst = std::max(worst, err / tol);
      EXPECT_LE(err, tol) << "step " << t << ": loss " << run.losses[t] << " vs reference " << ref.losses[t];
    }
    std::printf("  %-7s loss %.6f -> %.6f (reference %.6f -> %.6f), worst error / tolerance %.3g\n",
                ops::isa_name(level), run.losses.front(), run.losses.back(), ref.losses.front(), ref.losses.back(),
                worst);
  }
}

TEST(KernelTraining, ThreadsAreDeterministicAndAgreeWithOneThread) {
  const double n = double(kBatch) * 28 * 28;
  for (ops::IsaLevel level : levels_under_test()) {
    SCOPED_TRACE(ops::isa_name(level));
    const ops::KernelTable& k = ops::kernels_for(level);
    const TrainRun one = train(k, 1, 10);
    const TrainRun two_a = train(k, 2, 10), two_b = train(k, 2, 10);
    const TrainRun three = train(k, 3, 10);
    EXPECT_EQ(two_a.params, two_b.params) << "two runs with 2 threads differ";
    for (int t = 0; t < 10; ++t) {
      const double tol = (t + 1) * gamma(n) * std::fabs(one.losses[t]);
      EXPECT_NEAR(two_a.losses[t], one.losses[t], tol) << "step " << t;
      EXPECT_NEAR(three.losses[t], one.losses[t], tol) << "step " << t;
    }
  }
}

// Long runs at a larger batch: the threads sit at different layers for longer, so any overlap between
// what two slices write shows up as a difference between two runs.
TEST(KernelTraining, ThreadsAreDeterministicOverManySteps) {
  const ops::KernelTable& k = ops::kernels_for(levels_under_test().back());
  const TrainRun a = train(k, 2, 120, 128), b = train(k, 2, 120, 128);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
}

TEST(KernelTraining, OddBatchWithThreads) {
  // 17 samples on 2 threads: slices of 16 and 1; 3 samples: one slice empty.
  for (int batch : {17, 3}) {
    const TrainRun one = train(ops::kernels_for(levels_under_test().back()), 1, 3, batch);
    const TrainRun two = train(ops::kernels_for(levels_under_test().back()), 2, 3, batch);
    for (int t = 0; t < 3; ++t)
      EXPECT_NEAR(two.losses[t], one.losses[t], (t + 1) * gamma(double(batch) * 784) * one.losses[t]) << batch;
  }
}

// The hook runs after every layer, last first (layers without parameters too: the GradReducer moves its
// all-reduces on there), once that layer's gradients are complete - with threads, summed over slices.
TEST(KernelTraining, GradientHookFiresPerLayerLastFirst) {
  for (int threads : {1, 2}) {
    auto model = nn::make_lenet5();
    model->init_parameters(1);
    model->set_threads(threads);
    model->reserve(4);
    std::vector<float> x(4 * 784, 0.5f), dlogits(4 * kClasses, 0.1f);
    const ops::KernelTable& k = ops::kernels_for(levels_under_test().back());
    model->forward(k, x.data(), 4);
    std::vector<std::string> order;
    model->backward(k, x.data(), dlogits.data(), 4, [&](const nn::Layer& l) { order.push_back(l.name()); });
    EXPECT_EQ(order, (std::vector<std::string>{"fc3", "relu4", "fc2", "relu3", "fc1", "conv2", "conv1"}));
  }
}

TEST(KernelTraining, StepsAllocateNothing) {
  static const Data data;
  for (ops::IsaLevel level : levels_under_test()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(ops::isa_name(level)) + " threads " + std::to_string(threads));
      const ops::KernelTable& k = ops::kernels_for(level);
      auto model = nn::make_lenet5();
      model->init_parameters(3);
      model->set_threads(threads);
      model->reserve(kBatch);
      optim::Adam adam(model->params().size(), {});
      std::vector<float> probs(std::size_t(kBatch) * kClasses), dlogits(probs.size());
      for (int step = 0; step < 3; ++step) {
        if (step == 2) {
          g_allocs = 0;
          g_count_allocs = true;
        }
        const float* logits = model->forward(k, data.x.data(), kBatch);
        k.softmax_xent_forward(probs.data(), logits, data.y.data(), kBatch, kClasses);
        k.softmax_xent_backward(dlogits.data(), probs.data(), data.y.data(), kBatch, kClasses, 1.0f / kBatch);
        model->backward(k, data.x.data(), dlogits.data(), kBatch);
        adam.step(model->params().params(), model->params().grads());
        g_count_allocs = false;
      }
      EXPECT_EQ(g_allocs.load(), 0) << "allocations in the third step";
    }
  }
}

}  // namespace
}  // namespace ringtrain
