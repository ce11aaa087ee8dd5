// DistributedSampler against PyTorch (fixture written by tests/mpi/fixtures/make_sampler_fixture.py with
// torch's own DistributedSampler) and its properties, simulating every rank in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/data/distributed_sampler.h"

namespace ringtrain::data {
namespace {

struct TorchCase {
  int64_t n;
  int w;
  bool drop_last;
  int rank;
  std::vector<int64_t> positions;
};

std::vector<TorchCase> load_fixture() {
  std::string path = std::string(RINGTRAIN_SOURCE_DIR) + "/tests/mpi/fixtures/sampler_torch.txt";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path << ": missing; regenerate with /usr/bin/python3 tests/mpi/fixtures/make_sampler_fixture.py";
  std::vector<TorchCase> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    TorchCase c;
    int drop = 0;
    char colon = 0;
    in >> c.n >> c.w >> drop >> c.rank >> colon;
    c.drop_last = drop != 0;
    for (int64_t v; in >> v;) c.positions.push_back(v);
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(DistributedSampler, MatchesTorchWithoutShuffle) {
  auto cases = load_fixture();
  ASSERT_GE(cases.size(), 100u);
  int with_8000 = 0;
  for (const auto& c : cases) {
    DistributedSampler s(c.n, c.w, c.rank, {.shuffle = false, .seed = 0, .drop_last = c.drop_last});
    EXPECT_EQ(s.indices(), c.positions) << "N=" << c.n << " W=" << c.w << " drop_last=" << c.drop_last
                                        << " rank=" << c.rank;
    EXPECT_EQ(s.num_samples(), int64_t(c.positions.size()));
    with_8000 += c.n == 8000;
  }
  EXPECT_EQ(with_8000, 6);  // 8000 x W=3 x drop_last on/off
}

// With shuffling, torch picks the same positions out of its permutation; ours out of ours.
TEST(DistributedSampler, MatchesTorchPositionsWithShuffle) {
  for (const auto& c : load_fixture()) {
    for (int64_t epoch : {0, 3}) {
      DistributedSampler s(c.n, c.w, c.rank, {.shuffle = true, .seed = 42, .drop_last = c.drop_last});
      s.set_epoch(epoch);
      Rng rng(42 + uint64_t(epoch));
      std::vector<int64_t> perm = random_permutation(c.n, rng), want;
      for (int64_t p : c.positions) want.push_back(perm[p]);
      EXPECT_EQ(s.indices(), want) << "N=" << c.n << " W=" << c.w << " rank=" << c.rank;
    }
  }
}

TEST(DistributedSampler, TorchSizesForTenElevenAndEightThousand) {
  // PyTorch's arithmetic, spelled out: ceil(N/W) padded, floor(N/W) with drop_last.
  struct Want { int64_t n; bool drop; int64_t per_rank; };
  for (Want w : {Want{10, false, 4}, Want{10, true, 3}, Want{11, false, 4}, Want{11, true, 3},
                 Want{8000, false, 2667}, Want{8000, true, 2666}}) {
    DistributedSampler s(w.n, 3, 0, {.shuffle = true, .seed = 0, .drop_last = w.drop});
    EXPECT_EQ(s.num_samples(), w.per_rank) << w.n;
    EXPECT_EQ(s.total_size(), 3 * w.per_rank);
  }
}

void check_properties(int64_t N, int W, bool drop_last) {
  SCOPED_TRACE("N=" + std::to_string(N) + " W=" + std::to_string(W) + " drop_last=" + std::to_string(drop_last));
  std::vector<std::vector<int64_t>> epoch0, epoch1;
  for (int r = 0; r < W; ++r) {
    DistributedSampler s(N, W, r, {.shuffle = true, .seed = 7, .drop_last = drop_last});
    epoch0.push_back(s.indices());
    s.set_epoch(1);
    epoch1.push_back(s.indices());
  }
  const int64_t per_rank = drop_last ? N / W : (N + W - 1) / W;
  std::multiset<int64_t> seen;
  for (int r = 0; r < W; ++r) {
    EXPECT_EQ(int64_t(epoch0[r].size()), per_rank);  // equal lengths
    for (int64_t i : epoch0[r]) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, N);
      seen.insert(i);
    }
  }
  // Disjoint before padding: only the padding repeats indices, at most ceil(pad/N)+1 times each.
  int64_t pad = drop_last ? 0 : per_rank * W - N;
  int64_t repeats = 0;
  for (auto it = seen.begin(); it != seen.end(); it = seen.upper_bound(*it)) repeats += int64_t(seen.count(*it)) - 1;
  EXPECT_EQ(repeats, std::min(pad, per_rank * W));
  std::set<int64_t> distinct(seen.begin(), seen.end());
  // Covers the set (or drops exactly N mod W).
  EXPECT_EQ(int64_t(distinct.size()), drop_last ? per_rank * W : N);
  if (N > W + 1) {
    EXPECT_NE(epoch0, epoch1);  // a new order every epoch
  }
}

TEST(DistributedSampler, Properties) {
  for (int W : {1, 2, 3, 4, 7})
    for (int64_t N : {0, 1, 2, 3, 5, 10, 11, 100, 8000})
      for (bool drop : {false, true}) check_properties(N, W, drop);
}

TEST(DistributedSampler, SameEpochSameOrder) {
  DistributedSampler a(1000, 3, 1, {.shuffle = true, .seed = 5}), b(1000, 3, 1, {.shuffle = true, .seed = 5});
  a.set_epoch(4);
  b.set_epoch(4);
  EXPECT_EQ(a.indices(), b.indices());
  DistributedSampler c(1000, 3, 1, {.shuffle = true, .seed = 6});
  c.set_epoch(3);  // seed + epoch: (5, 4) and (6, 3) give the same stream, as in PyTorch
  EXPECT_EQ(a.indices(), c.indices());
}

TEST(DistributedSampler, OneRankIsThePermutationOfTheChosenStream) {
  DistributedSamplerOptions o;
  o.seed = 3;
  o.stream = 0x5eed5eedULL;
  DistributedSampler s(500, 1, 0, o);
  s.set_epoch(2);
  Rng rng(5, 0x5eed5eedULL);
  EXPECT_EQ(s.indices(), random_permutation(500, rng));
}

TEST(EvalShard, EachSampleExactlyOnce) {
  for (int W : {1, 2, 3, 4})
    for (int64_t N : {0, 1, 2, 10, 11, 2000, 2001}) {
      std::vector<int> count(N, 0);
      for (int r = 0; r < W; ++r) {
        auto s = eval_shard(N, W, r);
        EXPECT_LE(int64_t(s.size()), (N + W - 1) / W);
        EXPECT_GE(int64_t(s.size()), N / W);
        for (int64_t i : s) ++count[i];
      }
      for (int64_t i = 0; i < N; ++i) EXPECT_EQ(count[i], 1) << "N=" << N << " W=" << W << " i=" << i;
    }
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  EXPECT_THROW(DistributedSampler(10, 3, 3), Error);
  EXPECT_THROW(DistributedSampler(10, 3, -1), Error);
  EXPECT_THROW(eval_shard(10, 2, 2), Error);
}

}  // namespace
}  // namespace ringtrain::data
