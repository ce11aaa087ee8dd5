// Data parallelism for the zoo: W ranks x batch B of vit (no batch norm, so the ranks' shards add up to
// the global batch exactly) end 3 SGD steps (momentum 0.9) with the weights of 1 rank x batch W*B over
// the same samples, with the ring (overlapped with backward, 64 KiB buckets: the encoder's layers split
// across several) and the library's all-reduce. Global batch 12 divides by every W of 1-4.
//
// Tolerance: 1e-5 relative per tensor (norm-wise), as for LeNet-5 (tests/mpi/test_grad_reducer.cpp): the
// runs differ only in the order fp32 gradient sums are taken, a few ulps per gradient. SGD rather than
// Adam: the key part of in_proj_bias has an exactly zero gradient (softmax ignores a shift of every key),
// so it holds rounding noise, which Adam's first steps turn into updates of +-lr whatever its size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "synthetic_training.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

constexpr int kSteps = 3, kGlobalBatch = 12, kPixels = 28 * 28, kClasses = 10;
constexpr uint64_t kInitSeed = 77;

using Data = ringtrain::testing::SyntheticDigits;
Data make_data(int64_t n) { return ringtrain::testing::make_synthetic_digits(n, 5); }

// vit's head starts at zero (torchvision's init): give it weights so every gradient is non-trivial.
std::unique_ptr<nn::Model> make_vit_for_test() {
  auto model = nn::make_model("vit");
  model->init_parameters(kInitSeed);
  auto& p = model->params();
  Rng rng(3);
  for (int w : {p.views().size() - 2, p.views().size() - 1}) {
    const auto& v = p.views()[std::size_t(w)];
    for (std::size_t i = 0; i < v.numel; ++i) p.params()[v.offset + i] = rng.uniform(-0.1f, 0.1f);
  }
  return model;
}

// One step with the fastest kernels this CPU has (tests/mpi/synthetic_training.h).
void train_step(nn::Model& model, optim::Optimizer& opt, const Data& d, int64_t first, int N, GradReducer* reducer) {
  ringtrain::testing::train_step(ops::kernels_for(ops::default_isa()), model, opt, d, first, N, reducer);
}

optim::Sgd make_sgd(std::size_t n) {
  optim::SgdOptions o;
  o.lr = 0.01f;
  o.momentum = 0.9f;
  return optim::Sgd(n, o);
}

double max_rel(const nn::ParameterSet& p, const float* a, const float* b, std::string* worst) {
  double out = 0;
  for (const auto& v : p.views()) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < v.numel; ++i) {
      const double x = a[v.offset + i], y = b[v.offset + i];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    if (rel > out) {
      out = rel;
      *worst = v.name;
    }
  }
  return out;
}

class ZooDataParallel : public ::testing::TestWithParam<AllreduceAlgorithm> {};

TEST_P(ZooDataParallel, VitMatchesOneRankWithTheGlobalBatch) {
  const int W = world_size(), r = world_rank();
  const int B = kGlobalBatch / W;
  const Data d = make_data(int64_t(kSteps) * kGlobalBatch);

  // The reference: one process, the whole batch (every rank computes it for itself).
  auto ref = make_vit_for_test();
  ref->reserve(kGlobalBatch);
  optim::Sgd ref_sgd = make_sgd(ref->params().size());
  for (int s = 0; s < kSteps; ++s) train_step(*ref, ref_sgd, d, int64_t(s) * kGlobalBatch, kGlobalBatch, nullptr);

  MpiOptions mo;
  mo.algorithm = GetParam();
  mo.timeout_s = 120;
  MpiCommunicator comm(MPI_COMM_WORLD, mo);
  auto model = make_vit_for_test();
  auto& p = model->params();
  model->reserve(B);
  optim::Sgd sgd = make_sgd(p.size());
  GradReducer reducer(p, comm, {.bucket_bytes = 64 << 10, .overlap = true});
  for (int s = 0; s < kSteps; ++s) train_step(*model, sgd, d, int64_t(s) * kGlobalBatch + int64_t(r) * B, B, &reducer);

  std::string worst;
  const double rel = max_rel(p, p.params(), ref->params().params(), &worst);
  EXPECT_LE(rel, 1e-5) << W << " ranks x " << B << ": weights after " << kSteps << " steps differ in " << worst;
  EXPECT_GT(reducer.buckets().size(), 1u);
  if (r == 0)
    std::printf("  vit W=%d x B=%d %s: weights after %d steps rel %.2e (%zu buckets)\n", W, B,
                allreduce_name(GetParam()), kSteps, rel, reducer.buckets().size());
  std::vector<float> root(p.params(), p.params() + p.size());
  comm.broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), p.params(), root.size() * sizeof(float)), 0) << "rank " << r << " drifted";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ZooDataParallel,
                         ::testing::Values(AllreduceAlgorithm::Ring, AllreduceAlgorithm::Mpi),
                         [](const auto& info) { return std::string(allreduce_name(info.param)); });

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
