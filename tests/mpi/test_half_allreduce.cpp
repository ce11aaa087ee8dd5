// 16-bit gradient traffic (dist/half_allreduce.h) and the cross-rank skip of the loss scaler, for every
// world size the test runs under (1-4 ranks).
//
// Bound (derived in half_allreduce.h): at most W roundings to 16 bits of partial sums, each partial sum
// <= sum_r |x_r| in magnitude, and W-1 fp32 adds, so |got - exact| <= ((1+u_h)^W (1+u)^W - 1) sum_r |x_r|,
// u_h = 2^-8 (bf16, 8 significant bits) or 2^-11 (fp16), u = 2^-24. Every rank must hold the same bits.
// Bytes: each rank sends 2 (W-1)/W of the buffer on average, 2 bytes an element instead of 4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/half_allreduce.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/optim/loss_scaler.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

std::vector<float> input(int r, std::size_t n) {
  Rng rng(2000 + uint64_t(r));
  std::vector<float> x(n);
  // Gradient-like mixed magnitudes, within fp16's range.
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) * std::ldexp(1.0f, int(rng.below(12)) - 8);
  return x;
}

class HalfAllreduceTest : public ::testing::TestWithParam<GradComm> {};

TEST_P(HalfAllreduceTest, SumWithinRoundingBoundSameBitsOnEveryRank) {
  const int W = world_size(), r = world_rank();
  const double uh = GetParam() == GradComm::Bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double bound_factor = std::pow(1 + uh, W) * std::pow(1 + std::ldexp(1.0, -24), W) - 1;
  MpiCommunicator comm(MPI_COMM_WORLD, {});
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(W > 1 ? W - 1 : 1), std::size_t(61706),
                        std::size_t(1000003)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    HalfGradCommunicator half(comm, GetParam());
    auto got = input(r, n);
    half.allreduce_sum(got.data(), n);
    std::size_t bad = 0;
    double worst = 0;
    // Every rank's inputs, recomputed here (deterministic in (rank, i)).
    std::vector<std::vector<float>> xs;
    for (int q = 0; q < W; ++q) xs.push_back(input(q, n));
    for (std::size_t i = 0; i < n; ++i) {
      double exact = 0, mag = 0;
      for (int q = 0; q < W; ++q) exact += xs[q][i], mag += std::fabs(xs[q][i]);
      const double err = std::fabs(double(got[i]) - exact), tol = bound_factor * mag;
      if (W > 1) worst = std::max(worst, err / tol);
      if (W == 1 ? got[i] != xs[0][i] : !(err <= tol)) {
        if (bad++ < 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", exact " << exact << ", bound " << tol;
      }
    }
    EXPECT_EQ(bad, 0u);
    // Same bits everywhere: compare with rank 0's result.
    std::vector<float> root = got;
    comm.broadcast(root.data(), n * sizeof(float), 0);
    EXPECT_EQ(0, std::memcmp(root.data(), got.data(), n * sizeof(float))) << "ranks disagree";
    // Half the bytes of an fp32 ring on the wire.
    const std::size_t sent = half.traffic().bytes_sent;
    long long total = (long long)sent;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    // Over all ranks each chunk is sent W-1 times a phase: 2 (W-1) n elements of 2 bytes in all.
    EXPECT_EQ(std::size_t(total), 2 * std::size_t(W - 1) * n * 2);
    EXPECT_LE(ring_bytes_sent(n, W, 2) * W, std::size_t(total));  // the per-rank average, rounded down
    EXPECT_EQ(2 * ring_bytes_sent(n, W, 2), ring_bytes_sent(n, W, 4));
    if (r == 0 && W > 1 && n == 61706)
      ::testing::Test::RecordProperty("worst_error_over_bound", std::to_string(worst));
  }
}

// The non-blocking form (what the GradReducer drives between layers): the same bits as the blocking call
// whatever the ranks do between start and completion (rank r makes r idle progress calls; odd ranks
// complete on test_allreduce() alone); two in a row; bytes as for two sums.
TEST_P(HalfAllreduceTest, NonBlockingEqualsBlocking) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, {});
  for (std::size_t n : {std::size_t(1), std::size_t(W + 1), std::size_t(61706)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    HalfGradCommunicator blocking(comm, GetParam()), overlapped(comm, GetParam());
    auto want = input(r, n), got = input(r, n), again = input(r, n);
    blocking.allreduce_sum(want.data(), n);
    overlapped.start_allreduce_sum(got.data(), n);
    for (int i = 0; i < r; ++i) overlapped.test_allreduce();
    if (r % 2 == 0) {
      overlapped.wait_allreduce();
    } else {
      while (!overlapped.test_allreduce()) {
      }
    }
    EXPECT_TRUE(overlapped.test_allreduce()) << "nothing in flight after completion";
    overlapped.start_allreduce_sum(again.data(), n);
    overlapped.wait_allreduce();
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), n * sizeof(float))) << "non-blocking differs from blocking";
    EXPECT_EQ(0, std::memcmp(want.data(), again.data(), n * sizeof(float))) << "second non-blocking sum differs";
    EXPECT_EQ(overlapped.traffic().bytes_sent, 2 * blocking.traffic().bytes_sent);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HalfAllreduceTest, ::testing::Values(GradComm::Bf16, GradComm::Fp16),
                         [](const auto& info) { return std::string(grad_comm_name(info.param)); });

// fp16 has no room past 65504: an overflowing sum arrives as inf on every rank (and the loss scaler
// then skips the step), rather than as a wrong finite value.
TEST(HalfAllreduce, Fp16OverflowBecomesInfEverywhere) {
  const int W = world_size();
  if (W == 1) GTEST_SKIP() << "one rank sends nothing";
  MpiCommunicator comm(MPI_COMM_WORLD, {});
  HalfGradCommunicator half(comm, GradComm::Fp16);
  std::vector<float> x(10, 40000.0f);
  half.allreduce_sum(x.data(), x.size());
  for (float v : x) EXPECT_TRUE(std::isinf(v)) << v;
}

// A gradient holding inf/NaN on one rank only: the step is skipped on every rank, every rank's scale
// halves, and every rank's weights (and Adam state) are unchanged.
TEST(LossScalerRanks, InfOnOneRankSkipsEverywhere) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, {});
  const std::size_t n = 1000;
  std::vector<float> params = input(99, n);  // same on every rank
  optim::Adam adam(n, {});
  optim::LossScaler scaler;
  auto agree = [&](bool local) { return any_rank(comm, local); };
  // A good step on every rank first.
  auto g = input(r, n);
  for (auto& v : g) v *= scaler.scale();
  ASSERT_TRUE(scaler.step(adam, params.data(), g.data(), agree).applied);
  const auto before = params;
  for (const int culprit : {W - 1, 0}) {
    for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      auto h = input(r + 10, n);
      if (r == culprit) h[n / 2] = bad;
      const float s0 = scaler.scale();
      const optim::LossScaleStep st = scaler.step(adam, params.data(), h.data(), agree);
      EXPECT_FALSE(st.applied) << "rank " << r << " applied a step that rank " << culprit << " found non-finite";
      EXPECT_EQ(scaler.scale(), s0 * 0.5f);
      EXPECT_EQ(0, std::memcmp(params.data(), before.data(), n * sizeof(float)));
    }
  }
  EXPECT_EQ(scaler.skipped_steps(), 4);
  EXPECT_EQ(adam.steps(), 1);
  // And a clean step afterwards is applied everywhere.
  auto ok = input(r + 20, n);
  EXPECT_TRUE(scaler.step(adam, params.data(), ok.data(), agree).applied);
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
