// BatchLoader: every index of an epoch is delivered exactly once, in the order given, with the right
// pixels and labels, under 0-4 workers and any prefetch depth; restarting an epoch mid-way is safe.
#include <gtest/gtest.h>

#include <numeric>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/data/loader.h"

namespace ringtrain::data {
namespace {

Split numbered_split(int64_t n) {
  // Sample i's pixels encode i, so a test can tell which sample a batch row came from.
  Split s;
  s.count = n;
  s.rows = 3;
  s.cols = 2;
  s.images.resize(std::size_t(n) * 6);
  s.labels.resize(std::size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 6; ++k) s.images[i * 6 + k] = uint8_t((i * 7 + k) % 256);
    s.labels[i] = uint8_t(i % 10);
  }
  return s;
}

void expect_epoch(BatchLoader& loader, const Split& split, const std::vector<int64_t>& order, int batch) {
  int64_t pos = 0;
  for (;;) {
    Batch b = loader.next();
    if (b.N == 0) break;
    ASSERT_LE(b.N, batch);
    for (int n = 0; n < b.N; ++n, ++pos) {
      ASSERT_LT(pos, int64_t(order.size()));
      const int64_t i = order[pos];
      ASSERT_EQ(b.indices[n], i) << "position " << pos;
      ASSERT_EQ(b.labels[n], split.labels[i]);
      for (int k = 0; k < 6; ++k) ASSERT_FLOAT_EQ(b.x[n * 6 + k], float(split.images[i * 6 + k]) / 255.0f);
    }
  }
  EXPECT_EQ(pos, int64_t(order.size())) << "not every index was delivered";
  EXPECT_EQ(loader.next().N, 0) << "a batch after the end of the epoch";
}

TEST(Loader, DeliversEveryIndexOnceInOrderUnderAnyWorkerCount) {
  Split split = numbered_split(1003);
  for (int workers = 0; workers <= 4; ++workers)
    for (int prefetch : {1, 2, 5}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + " prefetch " + std::to_string(prefetch));
      BatchLoader loader(split, 17, workers, prefetch);
      for (int epoch = 0; epoch < 3; ++epoch) {
        Rng rng(epoch);
        // A shard like a DistributedSampler's: every third sample of a permutation.
        std::vector<int64_t> perm = random_permutation(split.count, rng), shard;
        for (std::size_t p = epoch; p < perm.size(); p += 3) shard.push_back(perm[p]);
        loader.start_epoch(shard);
        EXPECT_EQ(loader.batches_in_epoch(), (int64_t(shard.size()) + 16) / 17);
        expect_epoch(loader, split, shard, 17);
      }
    }
}

TEST(Loader, RestartingAnEpochMidwayDropsStaleBatches) {
  Split split = numbered_split(500);
  BatchLoader loader(split, 8, 3, 4);
  std::vector<int64_t> a(500), b(500);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.rbegin(), b.rend(), 0);
  loader.start_epoch(a);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(loader.next().N, 8);
  loader.start_epoch(b);
  expect_epoch(loader, split, b, 8);
}

TEST(Loader, StartsAtAGivenBatchForResume) {
  Split split = numbered_split(100);
  BatchLoader loader(split, 10, 2, 3);
  std::vector<int64_t> order(100);
  std::iota(order.begin(), order.end(), 0);
  loader.start_epoch(order, 4);
  Batch b = loader.next();
  ASSERT_EQ(b.N, 10);
  EXPECT_EQ(b.indices[0], 40);
}

TEST(Loader, RejectsBadIndicesAndOptions) {
  Split split = numbered_split(10);
  EXPECT_THROW(BatchLoader(split, 0, 1, 1), Error);
  EXPECT_THROW(BatchLoader(split, 4, -1, 1), Error);
  EXPECT_THROW(BatchLoader(split, 4, 1, 0), Error);
  BatchLoader loader(split, 4, 1, 2);
  EXPECT_THROW(loader.start_epoch({1, 2, 10}), Error);
}

}  // namespace
}  // namespace ringtrain::data

namespace ringtrain::data {
namespace {

TEST(Loader, ShiftAugmentationMovesPixelsAndDependsOnlyOnSeedEpochAndIndex) {
  Split split;
  split.count = 50;
  split.rows = split.cols = 8;
  split.images.assign(50 * 64, 0);
  split.labels.assign(50, 1);
  for (int i = 0; i < 50; ++i) split.images[i * 64 + 4 * 8 + 4] = 255;  // one bright pixel at (4,4)
  std::vector<int64_t> order(50);
  std::iota(order.begin(), order.end(), 0);
  auto positions = [&](int workers, int64_t epoch) {
    BatchLoader loader(split, 7, workers, 3, Augment{2, 99});
    loader.start_epoch(order, 0, epoch);
    std::vector<int> at;
    for (Batch b = loader.next(); b.N; b = loader.next())
      for (int n = 0; n < b.N; ++n) {
        int found = -1;
        for (int k = 0; k < 64; ++k)
          if (b.x[n * 64 + k] == 1.0f) found = k;
        at.push_back(found);
      }
    return at;
  };
  std::vector<int> a = positions(0, 0), b = positions(3, 0), c = positions(1, 1);
  EXPECT_EQ(a, b) << "the shift depends on the number of workers";
  EXPECT_NE(a, c) << "the shift does not change between epochs";
  bool moved = false;
  for (int k : a) {
    ASSERT_GE(k, 0) << "a shift of at most 2 px lost the pixel";
    const int y = k / 8, x = k % 8;
    EXPECT_LE(std::abs(y - 4), 2);
    EXPECT_LE(std::abs(x - 4), 2);
    moved = moved || k != 4 * 8 + 4;
  }
  EXPECT_TRUE(moved);
  EXPECT_THROW(BatchLoader(split, 7, 1, 3, Augment{8, 0}), Error);
}

}  // namespace
}  // namespace ringtrain::data
