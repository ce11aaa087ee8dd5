// --allreduce auto's cost model without MPI: the alpha-beta fit, the choice per size, the plan line,
// and its JSON (exact round trip, clear errors naming the source for anything else).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/allreduce_cost_model.h"
#include "ringtrain/dist/grad_reducer.h"

namespace ringtrain::dist {
namespace {

TEST(AllreduceCostModel, FitsAnExactLine) {
  const std::vector<double> n = {4096, 32768, 262144, 2097152};
  std::vector<double> t;
  for (double b : n) t.push_back(20e-6 + b * 1e-10);
  const AlphaBeta f = fit_alpha_beta(n, t);
  EXPECT_NEAR(f.alpha_s, 20e-6, 1e-12);
  EXPECT_NEAR(f.beta_s_per_byte, 1e-10, 1e-16);
}

TEST(AllreduceCostModel, FitWeighsRelativeErrorAndNeverGoesNegative) {
  // 20% noise at the large size must not swamp the small sizes' latency: a plain least-squares line
  // through these points has alpha 4.8 us; the relative fit keeps it within 10% of the true 10 us.
  const std::vector<double> n = {4096, 8192, 65536, 4194304};
  std::vector<double> t;
  for (double b : n) t.push_back(10e-6 + b * 1e-9);
  t.back() *= 1.2;
  const AlphaBeta f = fit_alpha_beta(n, t);
  EXPECT_NEAR(f.alpha_s, 10e-6, 1e-6);
  // Falling times (noise) give no negative slope.
  const AlphaBeta g = fit_alpha_beta({4096, 65536}, {30e-6, 20e-6});
  EXPECT_GE(g.alpha_s, 0);
  EXPECT_GE(g.beta_s_per_byte, 0);
}

AllreduceCostModel two_lines() {
  AllreduceCostModel m;
  m.world_size = 4;
  m.hosts = 1;
  m.max_bytes = std::size_t(1) << 20;
  m.lines[AllreduceAlgorithm::RecursiveDoubling] = {5e-6, 4e-10};
  m.lines[AllreduceAlgorithm::Ring] = {30e-6, 1e-10};
  return m;
}

TEST(AllreduceCostModel, ChoosesTheCheapestLinePerSize) {
  const AllreduceCostModel m = two_lines();
  // Crossover at (30 - 5) us / (3e-10 s/B) = 83,333 bytes.
  EXPECT_EQ(m.choose(4096), AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(m.choose(80000), AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(m.choose(90000), AllreduceAlgorithm::Ring);
  EXPECT_EQ(AllreduceCostModel{}.choose(4096), AllreduceAlgorithm::Ring) << "empty: the ring";
}

TEST(AllreduceCostModel, LeavesOutTheLibraryAboveTheLargestSizeTimed) {
  AllreduceCostModel m = two_lines();
  m.lines[AllreduceAlgorithm::Mpi] = {1e-6, 0.5e-10};  // cheapest everywhere, on paper
  EXPECT_EQ(m.choose(m.max_bytes), AllreduceAlgorithm::Mpi);
  EXPECT_EQ(m.choose(m.max_bytes + 1), AllreduceAlgorithm::Ring);
  m.lines[AllreduceAlgorithm::HalvingDoubling] = {1e-6, 0.9e-10};
  EXPECT_EQ(m.choose(m.max_bytes + 1), AllreduceAlgorithm::HalvingDoubling) << "ours still compete";
  m.lines.erase(AllreduceAlgorithm::Ring);
  m.lines.erase(AllreduceAlgorithm::RecursiveDoubling);
  m.lines.erase(AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(m.choose(m.max_bytes + 1), AllreduceAlgorithm::Mpi) << "mpi alone: mpi";
}

TEST(AllreduceCostModel, PlanNamesEachBucket) {
  std::vector<Bucket> buckets = {{2560, 61696 - 2560, 2, 9}, {0, 2560, 0, 1}};
  EXPECT_EQ(plan_text(two_lines(), buckets, 128 << 10), "bucket-kb 128: 0 ring (231.0 KiB), 1 rd (10.0 KiB)");
  const auto plan = plan_buckets(two_lines(), buckets);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1], AllreduceAlgorithm::RecursiveDoubling);
}

TEST(AllreduceCostModel, JsonRoundTripsExactly) {
  AllreduceCostModel m = two_lines();
  m.lines[AllreduceAlgorithm::Mpi] = {1.0 / 3.0 * 1e-5, 0.1 + 0.2};  // no short decimal form
  const AllreduceCostModel back = AllreduceCostModel::from_json(m.to_json(), "x");
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.hosts, 1);
  EXPECT_EQ(back.max_bytes, m.max_bytes);
  ASSERT_EQ(back.lines.size(), 3u);
  for (const auto& [a, f] : m.lines) {
    EXPECT_EQ(back.lines.at(a).alpha_s, f.alpha_s) << allreduce_name(a);
    EXPECT_EQ(back.lines.at(a).beta_s_per_byte, f.beta_s_per_byte) << allreduce_name(a);
  }
  EXPECT_EQ(back.to_json(), m.to_json());
}

void expect_error(const std::string& text, const std::string& want) {
  try {
    AllreduceCostModel::from_json(text, "cal.json");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("cal.json: not an all-reduce calibration", 0), 0u) << what;
    EXPECT_NE(what.find(want), std::string::npos) << what;
  }
}

TEST(AllreduceCostModel, RefusesWhatIsNotAModel) {
  const std::string good = two_lines().to_json();
  expect_error("{\"format\": \"ringtrain-allreduce-calibration\"", "not JSON");
  expect_error("[1, 2]", "format");
  expect_error("{\"format\": \"something else\", \"version\": 1}", "format");
  std::string v2 = good;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  expect_error(v2, "version 2");
  std::string bogus = good;
  bogus.replace(bogus.find("\"rd\""), 4, "\"bogus\"");
  expect_error(bogus, "expected ring, hd, rd, hier, mpi or auto");
  std::string negative = good;
  negative.insert(negative.find("\"alpha_s\":") + 10, "-");
  expect_error(negative, ">= 0");
  std::string no_world = good;
  no_world.replace(no_world.find("\"world_size\""), 12, "\"world_sides\"");
  expect_error(no_world, "world_size");
}

}  // namespace
}  // namespace ringtrain::dist
