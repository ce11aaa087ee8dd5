// Data-parallel training equals large-batch training: W ranks x batch B, gradients averaged by the
// GradReducer, give the same weights after 20 Adam steps of LeNet-5 as 1 rank x batch W*B over the same
// samples (ring and mpi all-reduce, overlap on and off). Also: buckets, the start-up weight broadcast,
// identical weights on every rank.
//
// Tolerance: 1e-5 relative, norm-wise per tensor (||w - w_ref|| / ||w_ref||). The two runs differ only
// in the order fp32 gradient sums are taken (per-rank batch sums + the all-reduce vs one batch sum), a
// relative difference of a few ulps per gradient; Adam divides by sqrt(v), so after 20 steps with
// lr 1e-3 the weights move ~2e-2 and a few-ulp gradient difference changes them by far less than 1e-5 of
// their norm (measured: ~1e-7, printed below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "synthetic_training.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

constexpr int kSteps = 20, kBatch = 8, kPixels = 28 * 28, kClasses = 10;
constexpr uint64_t kInitSeed = 1234;

using Data = ringtrain::testing::SyntheticDigits;
Data make_data(int64_t n) { return ringtrain::testing::make_synthetic_digits(n, 99); }
using ringtrain::testing::train_step;

struct Reference {
  std::vector<float> first_grads, weights;
};

// 1 rank x batch W*B over the same samples; computed once per process.
const Reference& reference(const Data& d, int W) {
  static Reference ref;
  if (!ref.weights.empty()) return ref;
  auto model = nn::make_lenet5();
  model->init_parameters(kInitSeed);
  model->reserve(W * kBatch);
  optim::Adam adam(model->params().size(), {});
  for (int s = 0; s < kSteps; ++s)
    train_step(ops::reference_kernels(), *model, adam, d, int64_t(s) * W * kBatch, W * kBatch, nullptr, s == 0 ? &ref.first_grads : nullptr);
  ref.weights.assign(model->params().params(), model->params().params() + model->params().size());
  return ref;
}

// Largest per-tensor ||a - b|| / ||b||.
double max_rel(const nn::ParameterSet& p, const float* a, const float* b, std::string* worst) {
  double out = 0;
  for (const auto& v : p.views()) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < v.numel; ++i) {
      double x = a[v.offset + i], y = b[v.offset + i];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    if (rel > out) {
      out = rel;
      *worst = v.name;
    }
  }
  return out;
}

struct Config {
  AllreduceAlgorithm algo;
  bool overlap;
  std::size_t bucket_bytes;
  double progress_interval_s = 0;  // > 0: the progress thread moves the buckets too
};

class DataParallel : public ::testing::TestWithParam<Config> {};

TEST_P(DataParallel, MatchesOneRankWithTheGlobalBatch) {
  const Config cfg = GetParam();
  const int W = world_size(), r = world_rank();
  const Data d = make_data(int64_t(kSteps) * W * kBatch);
  const Reference& ref = reference(d, W);

  MpiOptions mo;
  mo.algorithm = cfg.algo;
  mo.timeout_s = 120;
  MpiCommunicator comm(MPI_COMM_WORLD, mo);
  auto model = nn::make_lenet5();
  model->init_parameters(kInitSeed + uint64_t(r));  // different on every rank ...
  auto& p = model->params();
  comm.broadcast(p.params(), p.size() * sizeof(float), 0);  // ... until rank 0's are broadcast
  model->reserve(kBatch);
  optim::Adam adam(p.size(), {});
  GradReducer reducer(p, comm, {.bucket_bytes = cfg.bucket_bytes, .overlap = cfg.overlap,
                                .progress_interval_s = cfg.progress_interval_s});
  EXPECT_EQ(reducer.progress_thread(), cfg.progress_interval_s > 0 && W > 1);
  std::vector<float> first_grads;
  for (int s = 0; s < kSteps; ++s)
    train_step(ops::reference_kernels(), *model, adam, d, (int64_t(s) * W + r) * kBatch, kBatch, &reducer, s == 0 ? &first_grads : nullptr);

  std::string worst;
  double g_rel = max_rel(p, first_grads.data(), ref.first_grads.data(), &worst);
  EXPECT_LE(g_rel, 1e-5) << "averaged gradients of step 1 differ from batch " << W * kBatch << "'s in " << worst;
  double w_rel = max_rel(p, p.params(), ref.weights.data(), &worst);
  EXPECT_LE(w_rel, 1e-5) << "weights after " << kSteps << " steps differ in " << worst;
  if (r == 0)
    std::printf("  W=%d %s overlap=%d buckets=%zu: step-1 grads rel %.2e, weights after %d steps rel %.2e; "
                "waited %.3f ms/step for gradients\n",
                W, allreduce_name(cfg.algo), int(cfg.overlap), reducer.buckets().size(), g_rel, kSteps, w_rel,
                1e3 * reducer.stats().wait_s / reducer.stats().steps);
  EXPECT_EQ(reducer.stats().steps, kSteps);

  // Every rank holds exactly the same weights.
  std::vector<float> root(p.params(), p.params() + p.size());
  comm.broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), p.params(), root.size() * sizeof(float)), 0) << "rank " << r << " drifted";
}

INSTANTIATE_TEST_SUITE_P(
    Modes, DataParallel,
    ::testing::Values(Config{AllreduceAlgorithm::Ring, true, 25 << 10}, Config{AllreduceAlgorithm::Ring, false, 25 << 10},
                      Config{AllreduceAlgorithm::Mpi, true, 25 << 10}, Config{AllreduceAlgorithm::Mpi, false, 25 << 10},
                      Config{AllreduceAlgorithm::Ring, true, 1}, Config{AllreduceAlgorithm::Ring, true, 1 << 30},
                      // a progress thread (waking every 20 us: it races the layer-boundary calls all the time)
                      Config{AllreduceAlgorithm::Ring, true, 25 << 10, 20e-6}, Config{AllreduceAlgorithm::Ring, true, 1, 20e-6},
                      Config{AllreduceAlgorithm::HalvingDoubling, true, 25 << 10, 20e-6},
                      Config{AllreduceAlgorithm::Mpi, true, 25 << 10, 20e-6}),
    [](const auto& info) {
      return std::string(allreduce_name(info.param.algo)) + (info.param.overlap ? "_overlap" : "_no_overlap") +
             "_bucket" + std::to_string(info.param.bucket_bytes) + (info.param.progress_interval_s > 0 ? "_thread" : "");
    });

TEST(GradReducer, BucketsForLeNet5) {
  auto model = nn::make_lenet5();
  const auto& p = model->params();
  auto buckets = make_buckets(p, 25 << 10);
  ASSERT_EQ(buckets.size(), 3u);
  // Contiguous slices from the end of the buffer back to its start, whole views each.
  std::size_t end = p.size();
  for (const auto& b : buckets) {
    EXPECT_EQ(b.offset + b.count, end);
    EXPECT_EQ(b.offset, p.views()[b.first_view].offset);
    end = b.offset;
  }
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(p.views()[buckets[0].first_view].name, "fc2.weight");
  EXPECT_EQ(p.views()[buckets[1].first_view].name, "fc1.weight");
  EXPECT_EQ(p.views()[buckets[2].first_view].name, "conv1.weight");
  EXPECT_EQ(make_buckets(p, 1).size(), p.views().size());  // one view a bucket
  EXPECT_EQ(make_buckets(p, std::size_t(1) << 30).size(), 1u);
}

// A backward that reports nothing still gets every bucket reduced (wait() launches the rest).
TEST(GradReducer, WaitReducesUnreportedBuckets) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, {});
  auto model = nn::make_lenet5();
  auto& p = model->params();
  for (std::size_t i = 0; i < p.size(); ++i) p.grads()[i] = float(r + 1);
  GradReducer reducer(p, comm, {});
  reducer.wait();
  const float want = float(W + 1) / 2.0f;  // mean of 1..W
  for (std::size_t i = 0; i < p.size(); ++i) ASSERT_FLOAT_EQ(p.grads()[i], want) << i;
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
