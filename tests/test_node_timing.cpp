// nn/node_timing.h, the one per-node timer: which clock reads go to which node and part (a counting clock
// makes every lap exact), forward + backward against time_nodes' total, one entry a node, the callbacks'
// order, the model's mode restored, and its errors. Real clocks only where a figure need not be exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"
#include "ringtrain/ops/kernels.h"

using namespace ringtrain;

namespace {

// Clocks that advance by a known amount each read: read n returns n (laps of 1), or n * n (laps that grow,
// so a part's lap says where in the pass it was read).
int reads = 0;
double counting_clock() { return double(reads++); }
double squares_clock() {
  const double n = double(reads++);
  return n * n;
}

const ops::KernelTable& kernels() { return ops::kernels_for(ops::default_isa()); }

std::unique_ptr<nn::Model> lenet() {
  auto m = nn::make_model("lenet5");
  m->init_parameters(1);
  return m;
}

std::vector<float> pixels(const nn::Model& m, int batch) {
  Rng rng(3);
  std::vector<float> x(std::size_t(batch) * std::size_t(shape_numel(m.input_shape())));
  for (float& v : x) v = rng.uniform();
  return x;
}

// LeNet-5 with a batch of pixels and a constant logit gradient, for time_pass.
struct PassSetup {
  static constexpr int batch = 2;
  std::unique_ptr<nn::Model> m = lenet();
  std::size_t L = m->layers().size();
  std::vector<float> x = pixels(*m, batch);
  std::vector<float> dlogits = std::vector<float>(std::size_t(batch) * std::size_t(m->num_classes()), 0.01f);
};

}  // namespace

// A counting clock: every node's forward and backward is one lap, the loss and the after callback one each,
// and the whole pass their sum; the callbacks run once, loss between the forward and the backward.
TEST(NodeTiming, PassGivesEachNodeItsLaps) {
  PassSetup p;
  const std::size_t L = p.L;
  int losses = 0, afters = 0;
  reads = 0;
  const nn::PassTimes t = nn::time_pass(
      *p.m, kernels(), p.x.data(), p.batch,
      [&](const float* logits) {
        EXPECT_NE(logits, nullptr);
        EXPECT_EQ(afters, 0);
        ++losses;
        return p.dlogits.data();
      },
      [&] { ++afters; }, counting_clock);
  EXPECT_EQ(losses, 1);
  EXPECT_EQ(afters, 1);
  ASSERT_EQ(t.forward.size(), L);
  ASSERT_EQ(t.backward.size(), L);
  for (std::size_t i = 0; i < L; ++i) {
    EXPECT_EQ(t.forward[i], 1.0) << i;
    EXPECT_EQ(t.backward[i], 1.0) << i;
  }
  EXPECT_EQ(t.loss, 1.0);
  EXPECT_EQ(t.after, 1.0);
  EXPECT_EQ(t.total, double(2 * L + 2));
  EXPECT_GE(t.wall, 0.0);
  // The clock was read once at the start and once after each part.
  EXPECT_EQ(reads, int(2 * L + 3));
}

// Laps that grow with each read: the forward's nodes in order, the backward's last node first (read right
// after the loss), so every forward lap is shorter than every backward one and backward[L-1] < backward[0].
TEST(NodeTiming, BackwardLapsGoToNodesLastFirst) {
  PassSetup p;
  const std::size_t L = p.L;
  reads = 0;
  const nn::PassTimes t = nn::time_pass(
      *p.m, kernels(), p.x.data(), p.batch, [&](const float*) { return p.dlogits.data(); }, {}, squares_clock);
  // Read r (r >= 1) closes a lap of r^2 - (r-1)^2 = 2r - 1: forward node i is read i + 1, the loss L + 1,
  // backward node i read 2L + 1 - i, the (absent) after callback 2L + 2.
  for (std::size_t i = 0; i < L; ++i) {
    EXPECT_EQ(t.forward[i], double(2 * (i + 1) - 1)) << i;
    EXPECT_EQ(t.backward[i], double(2 * (2 * L + 1 - i) - 1)) << i;
  }
  EXPECT_EQ(t.loss, double(2 * (L + 1) - 1));
  EXPECT_EQ(t.after, double(2 * (2 * L + 2) - 1));
  const double parts = std::accumulate(t.forward.begin(), t.forward.end(), 0.0) +
                       std::accumulate(t.backward.begin(), t.backward.end(), 0.0) + t.loss + t.after;
  EXPECT_EQ(t.total, parts);
}

// One entry a node in each of forward, backward and total; with one timed pass total is exactly forward +
// backward (time_nodes' old figure: a pass's sum, its median); the counting clock gives 1 + 1 a node.
TEST(NodeTiming, NodePassesSplitTheTotal) {
  auto m = lenet();
  const std::size_t L = m->layers().size();
  reads = 0;
  const nn::NodeTimes c = nn::time_node_passes(*m, kernels(), 2, 3, counting_clock);
  ASSERT_EQ(c.forward.size(), L);
  ASSERT_EQ(c.backward.size(), L);
  ASSERT_EQ(c.total.size(), L);
  for (std::size_t i = 0; i < L; ++i) {
    EXPECT_EQ(c.forward[i], 1.0);
    EXPECT_EQ(c.backward[i], 1.0);
    EXPECT_EQ(c.total[i], 2.0);
  }
  EXPECT_EQ(reads, 4 * int(2 * L + 3));  // one untimed pass and three timed ones
  // Real clocks: positive, and forward + backward the total with one pass.
  for (nn::SecondsClock clock : {nn::SecondsClock(bench::wall_seconds), nn::SecondsClock(bench::thread_cpu_seconds)}) {
    const nn::NodeTimes t = nn::time_node_passes(*m, kernels(), 2, 1, clock);
    ASSERT_EQ(t.total.size(), L);
    for (std::size_t i = 0; i < L; ++i) {
      EXPECT_GE(t.forward[i], 0.0);
      EXPECT_GE(t.backward[i], 0.0);
      EXPECT_GT(t.total[i], 0.0);
      EXPECT_EQ(t.total[i], t.forward[i] + t.backward[i]) << i;
    }
  }
  const std::vector<double> w = nn::time_nodes(*m, kernels(), 2, 2);
  ASSERT_EQ(w.size(), L);
  for (double s : w) EXPECT_GT(s, 0.0);
}

// fastest is each node's quickest pass, not the median: an interrupted pass only ever adds time, so the
// pipeline's cut (train/pipeline_balance.cpp) prices nodes by it. A clock whose laps last 3, 1 and 2 in the
// three timed passes gives a node 6, 2 and 4: median 4, fastest 2.
std::size_t reads_a_pass = 0;
double pass_paced_clock() {
  static const double lap_of_pass[] = {1.0, 3.0, 1.0, 2.0};  // the untimed pass, then the three timed ones
  static double now = 0.0;
  const std::size_t pass = std::size_t(reads++) / reads_a_pass;
  return now += lap_of_pass[std::min<std::size_t>(pass, 3)];
}

TEST(NodeTiming, FastestIsTheQuickestPass) {
  auto m = lenet();
  const std::size_t L = m->layers().size();
  reads = 0;
  reads_a_pass = 2 * L + 3;  // start, L forward laps, the loss, L backward laps, after (NodePassesSplitTheTotal)
  const nn::NodeTimes t = nn::time_node_passes(*m, kernels(), 2, 3, pass_paced_clock);
  ASSERT_EQ(t.fastest.size(), L);
  for (std::size_t i = 0; i < L; ++i) {
    EXPECT_EQ(t.total[i], 4.0) << i;
    EXPECT_EQ(t.fastest[i], 2.0) << i;
  }
}

// The model's training mode is the caller's again afterwards (the passes run in training mode).
TEST(NodeTiming, RestoresTrainingMode) {
  auto m = lenet();
  m->set_training(false);
  nn::time_nodes(*m, kernels(), 1, 1);
  EXPECT_FALSE(m->training());
  m->set_training(true);
  nn::time_nodes(*m, kernels(), 1, 1);
  EXPECT_TRUE(m->training());
}

TEST(NodeTiming, ErrorsOnBadArguments) {
  auto m = lenet();
  EXPECT_THROW(nn::time_nodes(*m, kernels(), 0, 1), Error);
  EXPECT_THROW(nn::time_nodes(*m, kernels(), 1, 0), Error);
  EXPECT_THROW(nn::time_node_passes(*m, kernels(), 1, 1, nullptr), Error);
  const std::vector<float> x = pixels(*m, 1);
  std::vector<float> dlogits(std::size_t(m->num_classes()), 0.0f);
  auto loss = [&](const float*) { return dlogits.data(); };
  EXPECT_THROW(nn::time_pass(*m, kernels(), x.data(), 0, loss), Error);
  EXPECT_THROW(nn::time_pass(*m, kernels(), x.data(), 1, nn::LossGradient{}), Error);
  EXPECT_THROW(nn::time_pass(*m, kernels(), x.data(), 1, loss, {}, nullptr), Error);
}

TEST(NodeTiming, MedianSeconds) {
  EXPECT_EQ(nn::median_seconds({}), 0.0);
  EXPECT_EQ(nn::median_seconds({3.0}), 3.0);
  EXPECT_EQ(nn::median_seconds({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(nn::median_seconds({4.0, 1.0, 2.0, 8.0}), 3.0);
}
