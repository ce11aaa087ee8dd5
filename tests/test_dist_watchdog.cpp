// Watchdog in one process, with the abort replaced by a recorder: a collective armed past the timeout
// fires once, with a message naming the rank and the operation; a disarmed one never fires; 0 disables.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "ringtrain/dist/watchdog.h"

namespace ringtrain::dist {
namespace {

using namespace std::chrono_literals;

struct Recorder {
  std::mutex mu;
  std::vector<std::string> messages;
  Watchdog::TimeoutAction action() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      messages.push_back(m);
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size();
  }
};

TEST(Watchdog, FiresOnAHungCollectiveNamingRankAndOperation) {
  Recorder rec;
  Watchdog w(0.2, 3, 4, rec.action());
  auto start = std::chrono::steady_clock::now();
  {
    auto g = w.arm("allreduce_sum", "float", 48120, "ring");
    while (rec.count() == 0 && std::chrono::steady_clock::now() - start < 10s) std::this_thread::sleep_for(5ms);
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(rec.count(), 1u);
  EXPECT_GE(took, 0.2);
  EXPECT_LT(took, 5.0);
  const std::string& m = rec.messages[0];
  EXPECT_NE(m.find("rank 3 of 4"), std::string::npos) << m;
  EXPECT_NE(m.find("allreduce_sum(float x 48120, ring)"), std::string::npos) << m;
  EXPECT_NE(m.find("0.2 s"), std::string::npos) << m;
  EXPECT_TRUE(w.fired());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rec.count(), 1u) << "fires once";
}

TEST(Watchdog, QuickCollectivesNeverFire) {
  Recorder rec;
  Watchdog w(0.1, 0, 2, rec.action());
  auto end = std::chrono::steady_clock::now() + 400ms;
  while (std::chrono::steady_clock::now() < end) {
    auto g = w.arm("barrier");
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(300ms);  // idle time between collectives is never a hang
  EXPECT_EQ(rec.count(), 0u);
  EXPECT_FALSE(w.fired());
}

TEST(Watchdog, NamesAnOperationWithoutData) {
  Recorder rec;
  Watchdog w(0.05, 1, 2, rec.action());
  {
    auto g = w.arm("barrier");
    auto end = std::chrono::steady_clock::now() + 5s;
    while (rec.count() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(rec.count(), 1u);
  EXPECT_NE(rec.messages[0].find("rank 1 of 2: collective barrier() did not finish"), std::string::npos)
      << rec.messages[0];
}

// Arming allocates nothing: a fixed table of slots, reused after disarming; overflow goes unwatched.
TEST(Watchdog, SlotsAreReusedAndOverflowIsHarmless) {
  Recorder rec;
  Watchdog w(0.1, 0, 2, rec.action());
  for (int round = 0; round < 3; ++round) {
    std::vector<Watchdog::Guard> guards;
    for (int i = 0; i < 20; ++i) guards.push_back(w.arm("allreduce_sum", "float", std::size_t(i)));
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(rec.count(), 0u);
  {
    auto g = w.arm("broadcast", "byte", 7);  // a free slot again: watched
    auto end = std::chrono::steady_clock::now() + 5s;
    while (rec.count() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(rec.count(), 1u);
}

TEST(Watchdog, ZeroTimeoutDisables) {
  Recorder rec;
  Watchdog w(0, 0, 2, rec.action());
  auto g = w.arm("broadcast", "byte", 10);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rec.count(), 0u);
}

}  // namespace
}  // namespace ringtrain::dist
