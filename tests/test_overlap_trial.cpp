// --overlap auto's trial (train/overlap_trial.h) on one rank: the schedule (warm-up on, then on and off
// alternating), the decision from the medians (the faster mode is kept, a tie keeps overlap), and that
// `on` / `off` never switch.
#include <gtest/gtest.h>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/train/overlap_trial.h"

namespace ringtrain::train {
namespace {

constexpr int kSteps = OverlapTrial::kWarmup + 2 * OverlapTrial::kTrial;

// Runs the trial with step times on_s / off_s (plus one outlier each, which the median ignores).
OverlapTrial run_trial(double on_s, double off_s) {
  dist::LocalCommunicator comm;
  OverlapTrial t(OverlapPolicy::Auto);
  int decisions = 0;
  for (int64_t k = 0; k < kSteps + 5; ++k) {
    const bool on = t.overlap_at(k);
    if (k < OverlapTrial::kWarmup) EXPECT_TRUE(on) << k;
    else if (k < kSteps) EXPECT_EQ(on, (k - OverlapTrial::kWarmup) % 2 == 0) << k;
    double s = on ? on_s : off_s;
    if (k == OverlapTrial::kWarmup || k == OverlapTrial::kWarmup + 1) s *= 50;  // one slow step each way
    decisions += t.record(k, s, comm);
    EXPECT_EQ(t.decided(), k + 1 >= kSteps) << k;
  }
  EXPECT_EQ(decisions, 1);
  return t;
}

TEST(OverlapTrial, KeepsTheFasterMode) {
  OverlapTrial slower_off = run_trial(0.010, 0.012);
  EXPECT_TRUE(slower_off.keep_overlap());
  EXPECT_DOUBLE_EQ(slower_off.on_ms(), 10.0);
  EXPECT_DOUBLE_EQ(slower_off.off_ms(), 12.0);
  EXPECT_TRUE(slower_off.overlap_at(kSteps + 100));

  OverlapTrial slower_on = run_trial(0.012, 0.010);
  EXPECT_FALSE(slower_on.keep_overlap());
  EXPECT_FALSE(slower_on.overlap_at(kSteps + 100));
  EXPECT_NE(slower_on.summary().find("after backward from now on"), std::string::npos) << slower_on.summary();

  EXPECT_TRUE(run_trial(0.010, 0.010).keep_overlap());  // a tie keeps overlap
}

TEST(OverlapTrial, OnAndOffNeverSwitch) {
  dist::LocalCommunicator comm;
  for (OverlapPolicy p : {OverlapPolicy::On, OverlapPolicy::Off}) {
    OverlapTrial t(p);
    for (int64_t k = 0; k < 3 * kSteps; ++k) {
      EXPECT_EQ(t.overlap_at(k), p == OverlapPolicy::On);
      EXPECT_FALSE(t.record(k, p == OverlapPolicy::On ? 1.0 : 0.001, comm));
    }
  }
}

TEST(OverlapTrial, ParsesThePolicy) {
  EXPECT_EQ(parse_overlap("auto"), OverlapPolicy::Auto);
  EXPECT_EQ(parse_overlap("on"), OverlapPolicy::On);
  EXPECT_EQ(parse_overlap("off"), OverlapPolicy::Off);
  try {
    parse_overlap("sometimes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--overlap must be auto, on or off, got 'sometimes'"), std::string::npos);
  }
}

}  // namespace
}  // namespace ringtrain::train
