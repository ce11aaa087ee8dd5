// Dynamic loss scaling (optim/loss_scaler.h) on one rank: torch GradScaler's defaults and rules; an
// injected inf or NaN skips the step (weights and Adam state bit-for-bit unchanged), halves the scale and
// restarts the growth count; 2000 good steps double it; unscaling by a power of two is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/optim/loss_scaler.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::optim {
namespace {

std::vector<float> random_vec(std::size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

TEST(LossScaler, TorchDefaults) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, UnscaleIsExactAndFindsNonFinite) {
  LossScaler s;
  auto g = random_vec(1001, 1);
  std::vector<float> scaled(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) scaled[i] = g[i] * s.scale();
  EXPECT_FALSE(s.unscale_and_check(scaled.data(), scaled.size()));
  EXPECT_EQ(0, std::memcmp(scaled.data(), g.data(), g.size() * 4));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()})
    for (std::size_t at : {std::size_t(0), std::size_t(517), g.size() - 1}) {
      auto h = g;
      h[at] = bad;
      EXPECT_TRUE(s.unscale_and_check(h.data(), h.size())) << bad << " at " << at;
    }
  // The largest finite float is not an overflow.
  std::vector<float> big(3, std::numeric_limits<float>::max());
  LossScaler one({1.0f});
  EXPECT_FALSE(one.unscale_and_check(big.data(), big.size()));
}

TEST(LossScaler, NonFiniteStepIsSkippedWithWeightsAndStateUnchanged) {
  const std::size_t n = 257;
  auto params = random_vec(n, 2);
  Adam adam(n, {});
  LossScaler s;
  // One good step first, so the Adam state is non-zero.
  auto g = random_vec(n, 3);
  for (auto& x : g) x *= s.scale();
  ASSERT_TRUE(s.step(adam, params.data(), g.data()).applied);
  EXPECT_EQ(s.growth_tracker(), 1);
  const auto p_before = params;
  std::vector<std::vector<float>> state_before;
  for (const auto& b : adam.state()) state_before.emplace_back(b.data, b.data + b.size);
  const int64_t steps_before = adam.steps();

  auto bad = random_vec(n, 4);
  bad[100] = std::numeric_limits<float>::infinity();
  const LossScaleStep r = s.step(adam, params.data(), bad.data());
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.scale, 65536.0f);
  EXPECT_EQ(r.next_scale, 32768.0f);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(0, std::memcmp(params.data(), p_before.data(), n * 4)) << "weights changed on a skipped step";
  EXPECT_EQ(adam.steps(), steps_before);
  auto st = adam.state();
  for (std::size_t b = 0; b < st.size(); ++b)
    EXPECT_EQ(0, std::memcmp(st[b].data, state_before[b].data(), st[b].size * 4)) << st[b].name << " changed";

  // NaN too, and the other ranks' verdict wins: a finite local gradient is skipped if any_rank says so.
  auto nan = random_vec(n, 5);
  nan[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(s.step(adam, params.data(), nan.data()).applied);
  EXPECT_EQ(s.scale(), 16384.0f);
  auto fine = random_vec(n, 6);
  EXPECT_FALSE(s.step(adam, params.data(), fine.data(), [](bool) { return true; }).applied);
  EXPECT_EQ(s.scale(), 8192.0f);
  EXPECT_EQ(0, std::memcmp(params.data(), p_before.data(), n * 4));
}

TEST(LossScaler, GrowsAfterIntervalOfGoodSteps) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 1999);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  // A skip in between restarts the count.
  for (int i = 0; i < 1500; ++i) s.update(false);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0f);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0f);
}

TEST(LossScaler, RejectsBadOptions) {
  EXPECT_THROW(LossScaler({0.0f}), std::exception);
  EXPECT_THROW(LossScaler({1.0f, 1.0f}), std::exception);
  EXPECT_THROW(LossScaler({1.0f, 2.0f, 1.5f}), std::exception);
}

}  // namespace
}  // namespace ringtrain::optim
