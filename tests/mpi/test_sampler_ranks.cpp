// DistributedSampler across real ranks: every rank computes its own shard independently (no
// communication in the sampler); the shards must agree on the global order, be disjoint before padding,
// cover the dataset, be equal in length, and change between epochs. Eval shards count each sample once.
#include <gtest/gtest.h>

#include <set>

#include "mpi_gtest.h"
#include "ringtrain/data/distributed_sampler.h"

namespace ringtrain::data {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

// All ranks' shards, gathered on every rank (shards are equal in length by construction: checked).
std::vector<std::vector<int64_t>> gather(const std::vector<int64_t>& mine) {
  const int W = world_size();
  int64_t len = int64_t(mine.size()), max_len = 0, min_len = 0;
  MPI_Allreduce(&len, &max_len, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &min_len, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(min_len, max_len) << "shards differ in length";
  std::vector<int64_t> padded(max_len, -1), all(max_len * W);
  std::copy(mine.begin(), mine.end(), padded.begin());
  MPI_Allgather(padded.data(), int(max_len), MPI_INT64_T, all.data(), int(max_len), MPI_INT64_T, MPI_COMM_WORLD);
  std::vector<std::vector<int64_t>> out(W);
  for (int r = 0; r < W; ++r) out[r].assign(all.begin() + r * max_len, all.begin() + (r + 1) * max_len);
  return out;
}

class SamplerAcrossRanks : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(SamplerAcrossRanks, Shards) {
  const auto [N, drop_last] = GetParam();
  const int W = world_size(), r = world_rank();
  DistributedSampler s(N, W, r, {.shuffle = true, .seed = 11, .drop_last = drop_last});
  std::vector<std::vector<int64_t>> shards[2];
  for (int epoch = 0; epoch < 2; ++epoch) {
    s.set_epoch(epoch);
    shards[epoch] = gather(s.indices());
    // The ranks agree: interleaving the shards gives back this rank's own global list.
    std::vector<int64_t> global = s.global_indices(), interleaved(global.size());
    for (int q = 0; q < W; ++q)
      for (std::size_t j = 0; j < shards[epoch][q].size(); ++j) interleaved[j * W + q] = shards[epoch][q][j];
    EXPECT_EQ(interleaved, global);
    // Disjoint before padding, covering the set.
    std::set<int64_t> firsts(global.begin(), global.begin() + std::min<int64_t>(N, int64_t(global.size())));
    EXPECT_EQ(int64_t(firsts.size()), std::min<int64_t>(N, int64_t(global.size())));
    std::set<int64_t> all(global.begin(), global.end());
    EXPECT_EQ(int64_t(all.size()), drop_last ? (N / W) * W : N);
  }
  if (N > W + 1) {
    EXPECT_NE(shards[0], shards[1]) << "same order in epochs 0 and 1";
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SamplerAcrossRanks,
                         ::testing::Combine(::testing::Values<int64_t>(1, 2, 10, 11, 8000),
                                            ::testing::Bool()));

TEST(EvalShardAcrossRanks, CountsEachSampleOnce) {
  const int W = world_size(), r = world_rank();
  for (int64_t N : {1, 10, 11, 2001}) {
    std::vector<int64_t> seen(N, 0);
    for (int64_t i : eval_shard(N, W, r)) ++seen[i];
    MPI_Allreduce(MPI_IN_PLACE, seen.data(), int(N), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t i = 0; i < N; ++i) ASSERT_EQ(seen[i], 1) << "N=" << N << " sample " << i;
  }
}

}  // namespace
}  // namespace ringtrain::data

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
