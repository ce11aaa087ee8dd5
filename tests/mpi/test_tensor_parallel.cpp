// Tensor parallelism (issue 5): the process grid, ColumnParallelLinear / RowParallelLinear against the
// plain Linear, LeNet-5 trained on a dp x tp grid against one process with the same global batch, and
// checkpoints that move between tensor-parallel widths. Runs under mpirun with 1-4 ranks; each case needs
// a world size and is skipped at the others: (dp,tp) = (1,2) at np 2, (1,3) at np 3, (2,2) and (1,4) at
// np 4; the layer tests use the whole world as one tensor group with random splits at every np.
//
// Tolerances (u = 2^-24, gamma_K = K u / (1 - K u), the classic bound on a K-term fp32 dot product:
// |computed - exact| <= gamma_K * sum |terms|):
//  - layers: an output of the parallel layer and of the plain one are both K-term sums (+ the bias) of
//    the same products, grouped differently (T partial sums added by the all-reduce), so they differ by at
//    most 2 gamma_{K+T+1} sum|terms|, computed per element in double.
//  - training: 1e-5 relative per tensor (||w - w_ref|| / ||w_ref||), as the data-parallel test
//    (tests/mpi/test_grad_reducer.cpp) argues: the runs differ only in the order fp32 sums are taken,
//    a few ulps per gradient, and 20 Adam steps of lr 1e-3 turn that into far less than 1e-5 of a tensor's
//    norm (measured values are printed).
//  - checkpoints: reference kernels, so everything before fc2 is bit-identical across widths and fc2's
//    row-parallel sum is the only regrouped one; the bound on the logits follows it through ReLU and fc3
//    (see logits_bound()). Predictions (argmax) must be identical.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/conv_relu_pool.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/nn/parallel_linear.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/memory_report.h"
#include "ringtrain/train/tp_checkpoint.h"
#include "synthetic_training.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

constexpr double kU = 1.0 / 16777216.0;  // fp32 unit roundoff
double gamma(double K) { return K * kU / (1 - K * kU); }

MpiOptions test_options() {
  MpiOptions o;
  o.timeout_s = 120;
  return o;
}

// ---- process grid ------------------------------------------------------------------------------------

TEST(ProcessGrid, RefusesATpThatDoesNotDivideTheWorld) {
  EXPECT_NO_THROW(check_tp(4, 2));
  EXPECT_NO_THROW(check_tp(3, 3));
  try {
    check_tp(4, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tp 3 does not divide the world of 4 rank(s)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_tp(2, 0), Error);
  // The same error from the grid itself, before any communication (every rank throws).
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  EXPECT_THROW(ProcessGrid(world, world.size() + 1, test_options()), Error);
}

TEST(ProcessGrid, GroupsAreRunsOfTpRanksAndStridedDataParallelGroups) {
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  const int W = world.size(), w = world.rank();
  for (int tp = 1; tp <= W; ++tp) {
    if (W % tp) continue;
    ProcessGrid g(world, tp, test_options());
    EXPECT_EQ(g.tp_rank(), w % tp);
    EXPECT_EQ(g.dp_rank(), w / tp);
    EXPECT_EQ(g.tp_comm().size(), tp);
    EXPECT_EQ(g.dp_comm().size(), W / tp);
    // Sum of world ranks over each group: tensor group = [dp_rank*tp, dp_rank*tp + tp).
    int64_t s = w;
    g.tp_comm().allreduce_sum(&s, 1);
    const int64_t first = int64_t(g.dp_rank()) * tp;
    EXPECT_EQ(s, tp * first + int64_t(tp) * (tp - 1) / 2) << "tp " << tp;
    // Data-parallel group = {tp_rank, tp_rank + tp, ...}.
    int64_t d = w, want = 0;
    g.dp_comm().allreduce_sum(&d, 1);
    for (int k = 0; k < W / tp; ++k) want += g.tp_rank() + int64_t(k) * tp;
    EXPECT_EQ(d, want) << "tp " << tp;
  }
}

TEST(Shard, EvenSplitsDifferByAtMostOneAndEmptyShardsAreRefused) {
  for (auto [D, T] : std::vector<std::pair<int, int>>{{120, 3}, {120, 5}, {120, 7}, {84, 5}, {84, 3}, {84, 84}, {10, 4}}) {
    auto b = nn::even_split(D, T, "t");
    ASSERT_EQ(int(b.size()), T + 1);
    EXPECT_EQ(b.front(), 0);
    EXPECT_EQ(b.back(), D);
    int64_t lo = D, hi = 0;
    for (int r = 0; r < T; ++r) {
      lo = std::min(lo, b[r + 1] - b[r]);
      hi = std::max(hi, b[r + 1] - b[r]);
    }
    EXPECT_LE(hi - lo, 1) << D << " over " << T;
    EXPECT_GE(lo, 1);
  }
  try {
    nn::even_split(84, 85, "fc2 (row-parallel)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("84 features cannot be split over 85"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nn::check_split({0, 5, 5, 10}, 10, 3, "t"), Error);  // empty shard
  EXPECT_THROW(nn::check_split({0, 5, 10}, 12, 2, "t"), Error);     // does not cover
}

TEST(Shard, ExtractThenInsertRoundTripsAlongEachDimension) {
  Rng rng(5);
  const Shape full{7, 5, 3};
  std::vector<float> a(105), back(105, -1.f);
  for (auto& x : a) x = rng.uniform();
  for (int dim = 0; dim < 3; ++dim) {
    const int D = int(full[dim]);
    nn::ShardInfo info{full, dim, nn::even_split(D, std::min(D, 2), "t"), 0};
    for (int r = 0; r < info.count(); ++r) {
      std::vector<float> s(std::size_t(shape_numel(info.shard_shape(r))));
      nn::extract_shard(info, r, a.data(), s.data());
      // element (i, j, k) of the shard is element with index dim shifted by begin(r) of the whole tensor
      for (int64_t i = 0; i < info.shard_shape(r)[0]; ++i)
        for (int64_t j = 0; j < info.shard_shape(r)[1]; ++j)
          for (int64_t k = 0; k < info.shard_shape(r)[2]; ++k) {
            int64_t idx[3] = {i, j, k};
            idx[dim] += info.begin(r);
            ASSERT_EQ(s[std::size_t((i * info.shard_shape(r)[1] + j) * info.shard_shape(r)[2] + k)],
                      a[std::size_t((idx[0] * 5 + idx[1]) * 3 + idx[2])]);
          }
      nn::insert_shard(info, r, s.data(), back.data());
    }
    EXPECT_EQ(back, a) << "dim " << dim;
    std::fill(back.begin(), back.end(), -1.f);
  }
}

// ---- layers against the plain Linear -----------------------------------------------------------------

// Random bounds: T non-empty shards of D, cut at random places (the same on every rank: same seed).
std::vector<int64_t> random_split(Rng& rng, int D, int T) {
  std::vector<int64_t> cuts;
  while (int(cuts.size()) < T - 1) {
    int64_t c = 1 + rng.below(uint32_t(D - 1));
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> b{0};
  b.insert(b.end(), cuts.begin(), cuts.end());
  b.push_back(D);
  return b;
}

struct Plain {
  nn::ParameterSet ps;
  std::unique_ptr<nn::Layer> layer;
};

void fill(Rng& rng, float* p, std::size_t n, float lo = -1, float hi = 1) {
  for (std::size_t i = 0; i < n; ++i) p[i] = rng.uniform(lo, hi);
}

// Largest |a - b| / bound over elements; 1 or less passes.
struct Worst {
  double ratio = 0, diff = 0;
  std::size_t at = 0;
};
Worst compare(const float* a, const float* b, const std::vector<double>& bound) {
  Worst w;
  for (std::size_t i = 0; i < bound.size(); ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    double r = d / std::max(bound[i], 1e-300);
    if (!(r <= w.ratio)) w = {r, d, i};  // NaN counts as worst
  }
  return w;
}

class ParallelLinear : public ::testing::TestWithParam<bool> {};  // false: reference kernels, true: fast

TEST_P(ParallelLinear, ColumnAndRowMatchThePlainLayerOnRandomSplits) {
  const auto& k = GetParam() ? ops::kernels_for(ops::default_isa()) : ops::reference_kernels();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  ProcessGrid grid(world, world.size(), test_options());  // the whole world is one tensor group
  const int T = grid.tp(), r = grid.tp_rank();
  Rng rng(2024);  // same stream on every rank: same shapes, splits and data
  for (int trial = 0; trial < 12; ++trial) {
    const int N = 1 + int(rng.below(37)), I = T + int(rng.below(150)), O = T + int(rng.below(150));
    const bool column = trial % 2 == 0;
    const int D = column ? O : I;
    const auto bounds = trial < 2 ? nn::even_split(D, T, "t") : random_split(rng, D, T);
    SCOPED_TRACE(std::string(column ? "column" : "row") + " N=" + std::to_string(N) + " I=" + std::to_string(I) +
                 " O=" + std::to_string(O));

    Plain plain;
    plain.layer = std::make_unique<nn::Linear>("fc", I, O);
    plain.layer->declare(plain.ps);
    plain.layer->configure({I});
    plain.ps.allocate();
    fill(rng, plain.ps.params(), plain.ps.size());

    nn::ParameterSet ps;
    std::unique_ptr<nn::Layer> par;
    if (column)
      par = std::make_unique<nn::ColumnParallelLinear>("fc", I, O, grid.tensor_group(), bounds);
    else
      par = std::make_unique<nn::RowParallelLinear>("fc", I, O, grid.tensor_group(), bounds);
    par->declare(ps);
    const int64_t b0 = bounds[r], n_loc = bounds[r + 1] - bounds[r];
    const int I_loc = column ? I : int(n_loc), O_loc = column ? int(n_loc) : O;
    EXPECT_EQ(par->configure({I_loc}), (Shape{O_loc}));
    ps.allocate();
    split_to_shards(plain.ps, plain.ps.params(), ps, ps.params());

    std::vector<float> x(std::size_t(N) * I), dout(std::size_t(N) * O);
    fill(rng, x.data(), x.size());
    fill(rng, dout.data(), dout.size());
    const float* W = plain.ps.param(0);
    const float* bias = plain.ps.param(1);
    std::vector<float> y(std::size_t(N) * O), dx(std::size_t(N) * I);
    plain.layer->forward(k, plain.ps, x.data(), y.data(), N);
    plain.layer->backward(k, plain.ps, x.data(), y.data(), dout.data(), dx.data(), N);

    // This rank's input and output gradient slices.
    std::vector<float> x_loc(std::size_t(N) * I_loc), dout_loc(std::size_t(N) * O_loc);
    for (int n = 0; n < N; ++n) {
      for (int i = 0; i < I_loc; ++i) x_loc[std::size_t(n) * I_loc + i] = x[std::size_t(n) * I + (column ? 0 : b0) + i];
      for (int o = 0; o < O_loc; ++o)
        dout_loc[std::size_t(n) * O_loc + o] = dout[std::size_t(n) * O + (column ? b0 : 0) + o];
    }
    std::vector<float> y_loc(std::size_t(N) * O_loc), dx_loc(std::size_t(N) * I_loc);
    std::fill(ps.grads(), ps.grads() + ps.size(), std::nanf(""));  // backward must overwrite every gradient
    par->forward(k, ps, x_loc.data(), y_loc.data(), N);
    par->backward(k, ps, x_loc.data(), y_loc.data(), dout_loc.data(), dx_loc.data(), N);

    // Bounds, per element, from the plain layer's terms (K-term sums regrouped into T partial sums).
    const double g = 2 * gamma(std::max(std::max(I, O), N) + T + 1);
    std::vector<double> by(std::size_t(N) * O_loc), bdx(std::size_t(N) * I_loc);
    std::vector<float> y_want(by.size()), dx_want(bdx.size());
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O_loc; ++o) {
        const int og = (column ? int(b0) : 0) + o;
        double s = std::fabs(bias[og]);
        for (int i = 0; i < I; ++i) s += std::fabs(double(x[std::size_t(n) * I + i]) * W[std::size_t(og) * I + i]);
        by[std::size_t(n) * O_loc + o] = g * s;
        y_want[std::size_t(n) * O_loc + o] = y[std::size_t(n) * O + og];
      }
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < I_loc; ++i) {
        const int ig = (column ? 0 : int(b0)) + i;
        double s = 0;
        for (int o = 0; o < O; ++o) s += std::fabs(double(dout[std::size_t(n) * O + o]) * W[std::size_t(o) * I + ig]);
        bdx[std::size_t(n) * I_loc + i] = g * s;
        dx_want[std::size_t(n) * I_loc + i] = dx[std::size_t(n) * I + ig];
      }
    Worst wy = compare(y_loc.data(), y_want.data(), by), wdx = compare(dx_loc.data(), dx_want.data(), bdx);
    EXPECT_LE(wy.ratio, 1.0) << "forward output " << wy.at << " off by " << wy.diff;
    EXPECT_LE(wdx.ratio, 1.0) << "input gradient " << wdx.at << " off by " << wdx.diff;

    // Parameter gradients: this rank's shard of the plain layer's (N-term sums, computed alike).
    std::vector<float> want(ps.size());
    split_to_shards(plain.ps, plain.ps.grads(), ps, want.data());
    for (int v = 0; v < 2; ++v) {
      const auto& view = ps.views()[v];
      std::vector<double> bound(view.numel);
      // weight grad [o,i] = sum_n dout[n,o] x[n,i]; bias grad [o] = sum_n dout[n,o]
      for (std::size_t e = 0; e < view.numel; ++e) {
        int og, ig = -1;
        if (v == 0) {
          const int cols = column ? I : int(n_loc);
          og = int(e / cols) + (column ? int(b0) : 0);
          ig = int(e % cols) + (column ? 0 : int(b0));
        } else {
          og = int(e) + (column ? int(b0) : 0);
        }
        double s = 0;
        for (int n = 0; n < N; ++n)
          s += std::fabs(double(dout[std::size_t(n) * O + og]) * (ig < 0 ? 1.0 : double(x[std::size_t(n) * I + ig])));
        bound[e] = g * s;
      }
      Worst wg = compare(ps.grad(v), want.data() + view.offset, bound);
      EXPECT_LE(wg.ratio, 1.0) << view.name << " gradient " << wg.at << " off by " << wg.diff;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ParallelLinear, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "fast" : "reference"); });

// ---- LeNet-5 on a dp x tp grid against one process ----------------------------------------------------

constexpr int kSteps = 20, kBatch = 8, kPixels = 28 * 28, kClasses = 10;
constexpr uint64_t kInitSeed = 1234;

using Data = ringtrain::testing::SyntheticDigits;
Data make_data(int64_t n) { return ringtrain::testing::make_synthetic_digits(n, 99); }
using ringtrain::testing::train_step;

struct Reference {
  std::vector<float> first_grads, weights;
};

// One process, batch dp*B, the same samples; cached per (kernels, dp).
const Reference& reference(const ops::KernelTable& k, const Data& d, int dp) {
  static std::map<std::pair<int, int>, Reference> cache;
  Reference& ref = cache[{int(k.level), dp}];
  if (!ref.weights.empty()) return ref;
  auto model = nn::make_lenet5();
  model->init_parameters(kInitSeed);
  model->reserve(dp * kBatch);
  optim::Adam adam(model->params().size(), {});
  auto& p = model->params();
  for (int s = 0; s < kSteps; ++s)
    train_step(k, *model, adam, d, int64_t(s) * dp * kBatch, dp * kBatch, nullptr, s == 0 ? &ref.first_grads : nullptr);
  ref.weights.assign(p.params(), p.params() + p.size());
  return ref;
}

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
    if (!(rel <= out)) {
      out = rel;
      *worst = v.name;
    }
  }
  return out;
}

// A tensor-parallel LeNet-5 starting from the single-process initialisation (cut into shards).
std::unique_ptr<nn::Model> tp_lenet5(ProcessGrid& grid, const nn::Model& whole) {
  auto model = nn::make_lenet5_tp(grid.tensor_group());
  split_to_shards(whole.params(), whole.params().params(), model->params(), model->params().params());
  return model;
}

struct GridCase {
  int dp, tp;
  bool fast;
};

class TensorParallelTraining : public ::testing::TestWithParam<GridCase> {};

TEST_P(TensorParallelTraining, MatchesOneProcessWithTheGlobalBatch) {
  const GridCase c = GetParam();
  if (world_size() != c.dp * c.tp) GTEST_SKIP() << "needs " << c.dp * c.tp << " ranks";
  const auto& k = c.fast ? ops::kernels_for(ops::default_isa()) : ops::reference_kernels();
  const Data d = make_data(int64_t(kSteps) * c.dp * kBatch);
  const Reference& ref = reference(k, d, c.dp);

  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  ProcessGrid grid(world, c.tp, test_options());
  auto whole = nn::make_lenet5();
  whole->init_parameters(kInitSeed);
  auto model = tp_lenet5(grid, *whole);
  auto& p = model->params();
  model->reserve(kBatch);
  optim::Adam adam(p.size(), {});
  GradReducer reducer(p, grid.dp_comm(), {});
  std::vector<float> first_grads(whole->params().size());
  for (int s = 0; s < kSteps; ++s) {
    // Ranks of one tensor group take the same samples: those of their data-parallel rank.
    train_step(k, *model, adam, d, (int64_t(s) * c.dp + grid.dp_rank()) * kBatch, kBatch, &reducer);
    if (s == 0) gather_shards(p, p.grads(), whole->params(), first_grads.data(), grid.tp_comm());
  }
  std::vector<float> weights(whole->params().size());
  gather_shards(p, p.params(), whole->params(), weights.data(), grid.tp_comm());

  std::string worst;
  const double g_rel = max_rel(whole->params(), first_grads.data(), ref.first_grads.data(), &worst);
  EXPECT_LE(g_rel, 1e-5) << "step-1 gradients differ in " << worst;
  const double w_rel = max_rel(whole->params(), weights.data(), ref.weights.data(), &worst);
  EXPECT_LE(w_rel, 1e-5) << "weights after " << kSteps << " steps differ in " << worst;
  if (world_rank() == 0) {
    const auto& st = grid.tensor_group().stats();
    std::printf("  dp=%d tp=%d %s: step-1 grads rel %.2e, weights after %d steps rel %.2e; tp all-reduce %.0f "
                "floats/step in %.0f calls/step\n",
                c.dp, c.tp, c.fast ? "fast" : "reference", g_rel, kSteps, w_rel, double(st.floats) / kSteps,
                double(st.calls) / kSteps);
  }
  // fc2 forward + fc1 backward: one all-reduce each per step, of [B, 84] and [B, 400] (none in a group of one).
  EXPECT_EQ(grid.tensor_group().stats().calls, c.tp > 1 ? 2 * kSteps : 0);
  EXPECT_EQ(grid.tensor_group().stats().floats, c.tp > 1 ? int64_t(kSteps) * kBatch * (84 + 400) : 0);
  // Replicated parameters (and their Adam state) agree bit for bit across the tensor group ...
  EXPECT_EQ(replica_mismatches(p, p.params(), grid.tp_comm()), 0);
  for (const auto& b : adam.state()) EXPECT_EQ(replica_mismatches(p, b.data, grid.tp_comm()), 0) << b.name;
  // ... and every rank of the world holds the same whole model.
  std::vector<float> root = weights;
  world.broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), weights.data(), root.size() * sizeof(float)), 0) << "rank " << world_rank();
}

INSTANTIATE_TEST_SUITE_P(Grids, TensorParallelTraining,
                         ::testing::Values(GridCase{1, 2, false}, GridCase{2, 2, false}, GridCase{1, 4, false},
                                           GridCase{1, 3, false}, GridCase{1, 2, true}, GridCase{2, 2, true},
                                           GridCase{1, 4, true}, GridCase{1, 3, true}, GridCase{2, 1, false},
                                           GridCase{1, 1, false}),
                         [](const auto& info) {
                           return "dp" + std::to_string(info.param.dp) + "_tp" + std::to_string(info.param.tp) +
                                  (info.param.fast ? "_fast" : "_reference");
                         });

// Uneven, random splits of fc1's outputs (= fc2's inputs) over the whole world: the same weights as one
// process after 20 steps (LeNet-5's own splits are even for T <= 4; this covers the uneven ones).
TEST(TensorParallelTraining, UnevenRandomSplitMatchesOneProcess) {
  const auto& k = ops::reference_kernels();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  ProcessGrid grid(world, world.size(), test_options());
  Rng rng(77);
  std::vector<int64_t> bounds = random_split(rng, 120, grid.tp());
  nn::LayerList layers;
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv1", 1, 6, 5, 1, 2));
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv2", 6, 16, 5, 1, 0));
  layers.push_back(std::make_unique<nn::ColumnParallelLinear>("fc1", 400, 120, grid.tensor_group(), bounds));
  layers.push_back(std::make_unique<nn::ReLU>("relu3"));
  layers.push_back(std::make_unique<nn::RowParallelLinear>("fc2", 120, 84, grid.tensor_group(), bounds));
  layers.push_back(std::make_unique<nn::ReLU>("relu4"));
  layers.push_back(std::make_unique<nn::Linear>("fc3", 84, 10));
  nn::Model model(Shape{1, 28, 28}, std::move(layers));
  auto whole = nn::make_lenet5();
  whole->init_parameters(kInitSeed);
  split_to_shards(whole->params(), whole->params().params(), model.params(), model.params().params());
  EXPECT_EQ(model.params().view("fc1.weight").shape, (Shape{bounds[grid.tp_rank() + 1] - bounds[grid.tp_rank()], 400}));
  const Data d = make_data(int64_t(kSteps) * kBatch);
  const Reference& ref = reference(k, d, 1);
  model.reserve(kBatch);
  optim::Adam adam(model.params().size(), {});
  for (int s = 0; s < kSteps; ++s) train_step(k, model, adam, d, int64_t(s) * kBatch, kBatch, nullptr);
  std::vector<float> weights(whole->params().size());
  gather_shards(model.params(), model.params().params(), whole->params(), weights.data(), grid.tp_comm());
  std::string worst;
  const double w_rel = max_rel(whole->params(), weights.data(), ref.weights.data(), &worst);
  EXPECT_LE(w_rel, 1e-5) << "weights after " << kSteps << " steps differ in " << worst;
  EXPECT_EQ(replica_mismatches(model.params(), model.params().params(), grid.tp_comm()), 0);
  if (world_rank() == 0) {
    std::printf("  split of 120 over %d:", grid.tp());
    for (int r = 0; r < grid.tp(); ++r) std::printf(" %lld", (long long)(bounds[r + 1] - bounds[r]));
    std::printf("; weights after %d steps rel %.2e\n", kSteps, w_rel);
  }
}

// ---- memory ---------------------------------------------------------------------------------------------

TEST(TensorParallelMemory, EachRankHoldsAboutOneTpthOfTheFullyConnectedLayers) {
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  ProcessGrid grid(world, world.size(), test_options());
  auto model = nn::make_lenet5_tp(grid.tensor_group());
  const auto t = train::memory_totals(model->params());
  EXPECT_EQ(t.whole, std::size_t(nn::kLeNet5Parameters));
  EXPECT_EQ(t.fc_whole, std::size_t(48120 + 10164 + 850));
  // fc1 and fc2 weights cut in T, fc1.bias cut, fc2.bias and fc3 whole: (48000 + 120 + 10080)/T + 934 at most
  // (+1 row of each cut tensor for uneven splits).
  const int T = grid.tp();
  const double bound = (58200.0 / T + 400 + 1 + 120 + 934) / 59134.0;
  EXPECT_LE(t.fc_share(), bound);
  if (T == 4) {
    EXPECT_LE(t.fc_share(), 0.27) << "issue 5's acceptance: <= 27% of the fc weights with tp=4";
  }
  // The optimizer state is as large as the parameter buffer: the same share.
  optim::Adam adam(model->params().size(), {});
  for (const auto& b : adam.state()) EXPECT_EQ(b.size, model->params().size());
  if (world_rank() == 0)
    std::printf("%s", train::memory_report(model->params(), 2, "tp rank 0 of " + std::to_string(T)).c_str());
}

// ---- checkpoints across widths ----------------------------------------------------------------------------

// |logit difference| bound between two widths, per logit, with reference kernels: everything up to fc2's
// input h (relu3) is computed identically; fc2's outputs z are 121-term sums grouped differently, so
// |dz_j| <= 2 gamma_{121+T} (|b_j| + sum_i |h_i W2_ji|); ReLU does not enlarge differences; fc3 adds
// sum_j |W3_kj| |dz_j| plus its own regrouping-free rounding on slightly different inputs, bounded by
// 2 gamma_85 (|b3_k| + sum_j |W3_kj| |relu(z_j)|).
std::vector<double> logits_bound(const nn::Model& whole, const float* x, int N, int Tmax) {
  const auto& k = ops::reference_kernels();
  // conv1, conv2, fc1, relu3 as a model of their own, sharing the whole model's weights.
  nn::LayerList layers;
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv1", 1, 6, 5, 1, 2));
  layers.push_back(std::make_unique<nn::Conv2dReluPool>("conv2", 6, 16, 5, 1, 0));
  layers.push_back(std::make_unique<nn::Linear>("fc1", 400, 120));
  layers.push_back(std::make_unique<nn::ReLU>("relu3"));
  nn::Model front(Shape{1, 28, 28}, std::move(layers));
  split_to_shards(whole.params(), whole.params().params(), front.params(), front.params().params());
  front.reserve(N);
  const float* h = front.forward(k, x, N);
  const auto& P = whole.params();
  const float* W2 = P.params() + P.view("fc2.weight").offset;
  const float* b2 = P.params() + P.view("fc2.bias").offset;
  const float* W3 = P.params() + P.view("fc3.weight").offset;
  const float* b3 = P.params() + P.view("fc3.bias").offset;
  std::vector<double> bound(std::size_t(N) * 10);
  for (int n = 0; n < N; ++n) {
    double dz[84], a[84];
    for (int j = 0; j < 84; ++j) {
      double s = std::fabs(b2[j]), z = b2[j];
      for (int i = 0; i < 120; ++i) {
        s += std::fabs(double(h[n * 120 + i]) * W2[j * 120 + i]);
        z += double(h[n * 120 + i]) * W2[j * 120 + i];
      }
      dz[j] = 2 * gamma(121 + Tmax) * s;
      a[j] = std::max(z, 0.0) + dz[j];
    }
    for (int c = 0; c < 10; ++c) {
      double prop = 0, s = std::fabs(b3[c]);
      for (int j = 0; j < 84; ++j) {
        prop += std::fabs(W3[c * 84 + j]) * dz[j];
        s += std::fabs(W3[c * 84 + j]) * a[j];
      }
      bound[std::size_t(n) * 10 + c] = prop + 2 * gamma(85) * s;
    }
  }
  return bound;
}

TEST(TensorParallelCheckpoint, SavedWithTp2LoadsWithTp1AndTp4) {
  const int W = world_size();
  if (W % 2) GTEST_SKIP() << "needs an even world (tp=2)";
  const auto& k = ops::reference_kernels();
  MpiCommunicator world(MPI_COMM_WORLD, test_options());
  // A file every rank can read: rank 0 names it.
  char path[256] = {0};
  if (world.rank() == 0) std::snprintf(path, sizeof path, "/tmp/ringtrain_tp_ckpt_%d.safetensors", int(getpid()));
  world.broadcast(path, sizeof path, 0);

  // Train a few steps with tp = 2 (dp = W/2) so weights and Adam state are not the initial ones.
  const Data d = make_data(int64_t(6) * W * kBatch + 64);
  auto whole = nn::make_lenet5();
  whole->init_parameters(kInitSeed);
  std::vector<float> saved_weights, saved_m;
  std::vector<float> logits2;
  const float* test_x = d.images.data() + std::size_t(6) * W * kBatch * kPixels;
  constexpr int kTest = 64;
  {
    ProcessGrid g2(world, 2, test_options());
    auto m2 = tp_lenet5(g2, *whole);
    m2->reserve(kTest);
    auto& p = m2->params();
    optim::Adam adam(p.size(), {});
    GradReducer reducer(p, g2.dp_comm(), {});
    for (int s = 0; s < 6; ++s) train_step(k, *m2, adam, d, (int64_t(s) * g2.dp() + g2.dp_rank()) * kBatch, kBatch, &reducer);
    // Gather weights and Adam state to the whole model; rank 0 writes.
    auto full = nn::make_lenet5();
    optim::Adam full_adam(full->params().size(), {});
    gather_shards(p, p.params(), full->params(), full->params().params(), g2.tp_comm());
    auto st = adam.state(), full_st = full_adam.state();
    for (std::size_t b = 0; b < st.size(); ++b) gather_shards(p, st[b].data, full->params(), full_st[b].data, g2.tp_comm());
    train::save_sharded_checkpoint(path, *m2, &adam, {{"note", "tp=2"}}, g2);  // collective; rank 0 writes
    saved_weights.assign(full->params().params(), full->params().params() + full->params().size());
    saved_m.assign(full_st[0].data, full_st[0].data + full_st[0].size);
    const float* l = m2->forward(k, test_x, kTest);
    logits2.assign(l, l + kTest * 10);
  }
  world.barrier();

  // tp = 1: the plain model loads the file as any PyTorch-named checkpoint.
  auto m1 = nn::make_lenet5();
  train::load_weights(path, *m1);
  EXPECT_EQ(std::memcmp(m1->params().params(), saved_weights.data(), saved_weights.size() * sizeof(float)), 0);
  m1->reserve(kTest);
  const float* l1 = m1->forward(k, test_x, kTest);
  std::vector<float> logits1(l1, l1 + kTest * 10);
  const std::vector<double> bound = logits_bound(*m1, test_x, kTest, W);

  // tp = W (4 at np 4): load whole, cut into shards; the optimizer state too (a resumed run).
  ProcessGrid gw(world, W, test_options());
  auto mw = nn::make_lenet5_tp(gw.tensor_group());
  {
    auto full = nn::make_lenet5();
    train::load_sharded_weights(path, *mw);
    optim::Adam adam(mw->params().size(), {});
    train::load_sharded_optimizer_state(path, adam, *mw);
    EXPECT_EQ(adam.steps(), 6);
    auto st = adam.state();
    // Gathered back at width W: the same bits as saved at width 2.
    std::vector<float> back(full->params().size()), back_m(full->params().size());
    gather_shards(mw->params(), mw->params().params(), full->params(), back.data(), gw.tp_comm());
    gather_shards(mw->params(), st[0].data, full->params(), back_m.data(), gw.tp_comm());
    EXPECT_EQ(std::memcmp(back.data(), saved_weights.data(), back.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(back_m.data(), saved_m.data(), back_m.size() * sizeof(float)), 0);
  }
  mw->reserve(kTest);
  const float* lw = mw->forward(k, test_x, kTest);
  std::vector<float> logitsw(lw, lw + kTest * 10);

  auto argmax = [](const std::vector<float>& l, int n) {
    return int(std::max_element(l.begin() + n * 10, l.begin() + n * 10 + 10) - (l.begin() + n * 10));
  };
  for (int n = 0; n < kTest; ++n) {
    EXPECT_EQ(argmax(logits1, n), argmax(logits2, n)) << "sample " << n << ": tp=1 vs tp=2";
    EXPECT_EQ(argmax(logits1, n), argmax(logitsw, n)) << "sample " << n << ": tp=1 vs tp=" << W;
  }
  Worst w2 = compare(logits2.data(), logits1.data(), bound), ww = compare(logitsw.data(), logits1.data(), bound);
  EXPECT_LE(w2.ratio, 1.0) << "tp=2 logit " << w2.at << " off by " << w2.diff;
  EXPECT_LE(ww.ratio, 1.0) << "tp=" << W << " logit " << ww.at << " off by " << ww.diff;
  if (world.rank() == 0)
    std::printf("  logits vs tp=1: tp=2 max diff %.2e (%.3f of bound), tp=%d %.2e (%.3f of bound)\n", w2.diff, w2.ratio,
                W, ww.diff, ww.ratio);
  world.barrier();
  if (world.rank() == 0) std::remove(path);
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
