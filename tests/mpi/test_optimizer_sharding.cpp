// Optimizer-state sharding (ZeRO stage 1) at every world size the test runs under:
//  - the ring's two phases: after the reduce-scatter a rank's chunk holds exactly the bits the whole
//    all-reduce leaves there, and the all-gather copies every rank's chunk to all; the chunks tile the buffer;
//  - LeNet-5 trained W ranks x batch 8 with the state sharded ends bit-identical, on every rank, to the same
//    run unsharded (Adam with an EMA of the weights, SGD; overlap on and off; several bucket sizes), while
//    each rank holds at most 1/W of the state (+ one float a bucket);
//  - the whole state gathered from the slices equals the unsharded optimizer's, and a shard taken from a
//    whole state (a checkpoint read back at another world size) equals the slices trained in place.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/ring_allreduce.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/train/optimizer_shards.h"
#include "synthetic_training.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

std::vector<float> random_floats(uint64_t seed, std::size_t n) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) * float(1 << rng.below(12));  // magnitudes that make order matter
  return x;
}

TEST(RingPhases, ReduceScatterThenAllGatherIsTheAllReduce) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, {.timeout_s = 120});
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(W - 1), std::size_t(W + 1), std::size_t(1000003)}) {
    const std::vector<float> mine = random_floats(7 + uint64_t(r), n);
    std::vector<float> whole = mine;
    comm.allreduce_sum(whole.data(), n);

    // Reduce-scatter, driven by polling this time.
    std::vector<float> scattered = mine;
    comm.start_reduce_scatter_sum(scattered.data(), n);
    while (!comm.test_allreduce()) {
    }
    const Communicator::Range c = comm.shard_chunk(n);
    ASSERT_LE(c.begin, c.end);
    ASSERT_LE(c.end, n);
    EXPECT_EQ(0, std::memcmp(scattered.data() + c.begin, whole.data() + c.begin, (c.end - c.begin) * sizeof(float)))
        << "n=" << n << ": rank " << r << "'s reduced chunk differs from the all-reduce's bits";

    // The chunks tile [0, n): their lengths add up to n and each begins where its predecessor ends.
    std::vector<int64_t> lengths(std::size_t(W), 0);
    lengths[std::size_t(r)] = int64_t(c.end - c.begin);
    comm.allreduce_sum(lengths.data(), lengths.size());
    int64_t total = 0;
    for (int64_t l : lengths) total += l;
    EXPECT_EQ(total, int64_t(n));

    // All-gather (blocking wait): garbage outside this rank's chunk is overwritten by the owners' chunks.
    std::vector<float> gathered(n, -12345.0f);
    std::copy(whole.begin() + std::ptrdiff_t(c.begin), whole.begin() + std::ptrdiff_t(c.end), gathered.begin() + std::ptrdiff_t(c.begin));
    comm.start_all_gather(gathered.data(), n);
    comm.wait_allreduce();
    EXPECT_EQ(0, std::memcmp(gathered.data(), whole.data(), n * sizeof(float))) << "n=" << n;
  }
}

constexpr int kSteps = 12, kBatch = 8;
constexpr uint64_t kInitSeed = 4321;

struct Trained {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<GradReducer> reducer;
};

struct Case {
  std::string optimizer;
  bool overlap;
  std::size_t bucket_bytes;
};

std::unique_ptr<optim::Optimizer> make_opt(const std::string& kind, std::size_t n) {
  if (kind == "adam") return std::make_unique<optim::Adam>(n, optim::AdamOptions{});
  return std::make_unique<optim::Sgd>(n, optim::SgdOptions{});
}

// W ranks x kBatch, kSteps steps on synthetic digits, sharded or not.
Trained train(Communicator& comm, const Case& c, bool shard) {
  const int W = comm.size(), r = comm.rank();
  const auto d = ringtrain::testing::make_synthetic_digits(int64_t(kSteps) * W * kBatch, 5);
  Trained t;
  t.model = nn::make_lenet5();
  t.model->init_parameters(kInitSeed);
  t.model->reserve(kBatch);
  auto& p = t.model->params();
  t.reducer = std::make_unique<GradReducer>(
      p, comm, GradReducerOptions{.bucket_bytes = c.bucket_bytes, .overlap = c.overlap, .shard = shard});
  const std::vector<optim::Span> spans = t.reducer->shard_spans();
  std::size_t floats = 0;
  for (const auto& s : spans) floats += s.count;
  t.optimizer = make_opt(c.optimizer, floats);
  t.optimizer->set_spans(spans);
  t.optimizer->enable_ema(0.9f, p.params());
  for (int s = 0; s < kSteps; ++s) {
    ringtrain::testing::train_step(ops::reference_kernels(), *t.model, *t.optimizer, d, (int64_t(s) * W + r) * kBatch,
                                   kBatch, t.reducer.get());
    t.optimizer->update_ema(p.params());
    t.reducer->all_gather(p.params());
  }
  return t;
}

class Sharded : public ::testing::TestWithParam<Case> {};

TEST_P(Sharded, BitIdenticalToUnshardedWithOneWthOfTheState) {
  const Case c = GetParam();
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, {.timeout_s = 120});
  Trained plain = train(comm, c, false), sharded = train(comm, c, true);
  const std::size_t n = plain.model->params().size();

  EXPECT_EQ(0, std::memcmp(plain.model->params().params(), sharded.model->params().params(), n * sizeof(float)))
      << "rank " << r << ": sharded weights differ from unsharded";
  std::vector<float> root(sharded.model->params().params(), sharded.model->params().params() + n);
  comm.broadcast(root.data(), n * sizeof(float), 0);
  EXPECT_EQ(0, std::memcmp(root.data(), sharded.model->params().params(), n * sizeof(float))) << "rank " << r << " drifted";

  // Each rank's state: its chunk of every bucket, at most ceil(count / W) floats a bucket.
  const std::size_t buckets = sharded.reducer->buckets().size();
  EXPECT_LE(sharded.optimizer->state_floats(), n / std::size_t(W) + buckets) << "rank " << r;
  if (W > 1) EXPECT_TRUE(sharded.reducer->sharded());

  // The whole state, gathered, is the unsharded optimizer's, bit for bit (EMA included).
  auto whole = train::gather_optimizer_state(*sharded.optimizer, *sharded.reducer, n);
  auto want = plain.optimizer->state(), got = whole->state();
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(got[b].size, n);
    EXPECT_EQ(0, std::memcmp(want[b].data, got[b].data, n * sizeof(float))) << "state " << want[b].name;
  }
  EXPECT_EQ(whole->steps(), kSteps);

  // A shard cut from the whole state (what resuming from a checkpoint does) is this rank's slices.
  auto again = make_opt(c.optimizer, sharded.optimizer->state_floats());
  again->set_spans(sharded.optimizer->spans());
  std::vector<float> zeros(n, 0.0f);
  again->enable_ema(0.9f, zeros.data());
  train::take_optimizer_shard(*plain.optimizer, *again);
  auto cut = again->state(), kept = sharded.optimizer->state();
  for (std::size_t b = 0; b < kept.size(); ++b)
    EXPECT_EQ(0, std::memcmp(cut[b].data, kept[b].data, kept[b].size * sizeof(float))) << "state " << kept[b].name;
  EXPECT_EQ(again->steps(), kSteps);
}

INSTANTIATE_TEST_SUITE_P(Modes, Sharded,
                         ::testing::Values(Case{"adam", true, 25 << 10}, Case{"adam", false, 128 << 10},
                                           Case{"sgd", true, 1}, Case{"adam", true, std::size_t(1) << 30}),
                         [](const auto& info) {
                           return info.param.optimizer + (info.param.overlap ? "_overlap" : "_no_overlap") +
                                  "_bucket" + std::to_string(info.param.bucket_bytes);
                         });

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
