// Pipeline stages and schedules without any communication: where the zoo's graphs can be cut (chain
// points: never inside a residual block), the balanced cut against brute force, --pp-split's one-line
// errors, stages chained by hand computing the whole model's logits, parameter gradients and batch-norm
// statistics bit for bit (the input gradient a stage sends back included), and the schedules' order,
// their in-flight bounds and their bubble in a simulation with unit costs; stage copies sharing one
// ParameterSet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/attention.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"
#include "ringtrain/nn/pipeline_stages.h"
#include "ringtrain/train/pipeline_balance.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/train/pipeline_engine.h"
#include "ringtrain/train/pipeline_schedule.h"

using namespace ringtrain;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineStages, LeNet5IsAChainOfLayers) {
  auto m = nn::make_model("lenet5");
  const std::vector<int> points = nn::chain_points(*m);
  ASSERT_EQ(int(points.size()), int(m->layers().size()) - 1);
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i], int(i) + 1);
}

TEST(PipelineStages, ResNet18CutsOnlyBetweenBlocks) {
  auto m = nn::make_model("resnet18");
  const std::vector<int> points = nn::chain_points(*m);
  int block_starts = 0;
  for (int c : points) {
    const std::string& name = m->layers()[std::size_t(c)]->name();
    // Inside layerN.M only before the block (conv1) or after its residual add (relu2).
    if (name.rfind("layer", 0) == 0) EXPECT_TRUE(ends_with(name, ".conv1") || ends_with(name, ".relu2")) << name;
    block_starts += ends_with(name, ".conv1");
  }
  EXPECT_EQ(block_starts, 8);  // every BasicBlock can start a stage
}

TEST(PipelineStages, ViTCutsBetweenEncoderLayers) {
  auto m = nn::make_model("vit");
  const std::vector<int> points = nn::chain_points(*m);
  int layer_starts = 0;
  for (int c : points) layer_starts += ends_with(m->layers()[std::size_t(c)]->name(), ".ln_1");
  EXPECT_EQ(layer_starts, 6);
  for (int c : points) EXPECT_FALSE(ends_with(m->layers()[std::size_t(c)]->name(), ".add_1"));
}

// The smallest largest stage cost over every cut at chain points (P = 2, 3).
double brute_force(const nn::Model& m, int P) {
  const std::vector<int> pts = nn::chain_points(m);
  const int L = int(m.layers().size());
  double best = 1e300;
  auto cost = [&](const std::vector<int>& b) {
    nn::StageCut c{b};
    double worst = 0;
    for (int s = 0; s < c.stages(); ++s) worst = std::max(worst, nn::stage_cost(m, c, s));
    return worst;
  };
  for (std::size_t i = 0; i < pts.size(); ++i) {
    if (P == 2) best = std::min(best, cost({0, pts[i], L}));
    for (std::size_t j = i + 1; P == 3 && j < pts.size(); ++j) best = std::min(best, cost({0, pts[i], pts[j], L}));
  }
  return best;
}

TEST(PipelineStages, BalancedCutIsTheBestOne) {
  for (const char* name : {"lenet5", "resnet18", "vit", "mobilenet_v2"}) {
    auto m = nn::make_model(name);
    for (int P : {2, 3}) {
      const nn::StageCut cut = nn::balanced_cut(*m, P);
      ASSERT_EQ(cut.stages(), P) << name;
      double worst = 0;
      for (int s = 0; s < P; ++s) {
        EXPECT_LT(cut.begin(s), cut.end(s)) << name;
        worst = std::max(worst, nn::stage_cost(*m, cut, s));
      }
      EXPECT_DOUBLE_EQ(worst, brute_force(*m, P)) << name << " P=" << P;
      const std::vector<int> pts = nn::chain_points(*m);
      for (int s = 1; s < P; ++s) EXPECT_TRUE(std::binary_search(pts.begin(), pts.end(), cut.begin(s))) << name;
    }
  }
  // vit's 2 stages split the 6 encoder layers 3 + 3 give or take the stem and head.
  auto vit = nn::make_model("vit");
  const nn::StageCut c = nn::balanced_cut(*vit, 2);
  const double a = nn::stage_cost(*vit, c, 0), b = nn::stage_cost(*vit, c, 1);
  EXPECT_LT(std::max(a, b) / std::min(a, b), 1.25);
}

// --pp-balance time: the same search on node costs given from outside (measured seconds).
TEST(PipelineStages, BalancedCutFollowsGivenNodeCosts) {
  auto m = nn::make_model("lenet5");  // every node boundary is a chain point
  const int L = int(m->layers().size());
  std::vector<double> cost(std::size_t(L), 1.0);
  EXPECT_EQ(nn::balanced_cut(*m, cost, 2).begin(1), L / 2);  // equal nodes: the middle (ties: the earlier cut)
  cost[0] = double(L);  // one node as heavy as all others together: it is a stage of its own
  EXPECT_EQ(nn::balanced_cut(*m, cost, 2).begins, (std::vector<int>{0, 1, L}));
  cost[0] = 1.0;
  cost[std::size_t(L) - 1] = double(L);
  EXPECT_EQ(nn::balanced_cut(*m, cost, 2).begins, (std::vector<int>{0, L - 1, L}));
  // The model's own costs through this entry give the cost-balanced cut.
  std::vector<double> own(static_cast<std::size_t>(L));
  for (int i = 0; i < L; ++i) own[std::size_t(i)] = m->node_cost(std::size_t(i));
  EXPECT_EQ(nn::balanced_cut(*m, own, 3).begins, nn::balanced_cut(*m, 3).begins);
  EXPECT_NE(error_of([&] { nn::balanced_cut(*m, std::vector<double>(3, 1.0), 2); }).find("3 node costs for a model of"),
            std::string::npos);
  const std::vector<std::vector<double>> ms(2, std::vector<double>(std::size_t(L), 1e-3));
  const std::string d = nn::describe_cut(*m, nn::StageCut{{0, 1, L}}, ms);
  EXPECT_NE(d.find("stage 1: nodes 1-"), std::string::npos) << d;
  EXPECT_NE(d.find("of the measured time (" + std::to_string(L - 1) + ".00 ms a micro-batch)"), std::string::npos) << d;
}

// Each stage priced by its own ranks' times: a stage whose ranks run at half speed gets about half the work.
TEST(PipelineStages, BalancedCutGivesASlowerStageLessWork) {
  auto m = nn::make_model("lenet5");  // every node boundary is a chain point
  const int L = int(m->layers().size());
  ASSERT_GE(L, 6);
  // For P = 2 the best cut is a plain scan over every c (earliest on ties): the oracle.
  auto scan = [&](const std::vector<std::vector<double>>& t) {
    int best_c = 1;
    double best = 1e300;
    for (int c = 1; c < L; ++c) {
      double a = 0, b = 0;
      for (int i = 0; i < c; ++i) a += t[0][std::size_t(i)];
      for (int i = c; i < L; ++i) b += t[1][std::size_t(i)];
      if (std::max(a, b) < best) best = std::max(a, b), best_c = c;
    }
    return best_c;
  };
  std::vector<std::vector<double>> ms(2, std::vector<double>(std::size_t(L), 1e-3));
  EXPECT_EQ(nn::balanced_cut(*m, ms).begin(1), L / 2);  // equal rows: the one-row cut
  ms[1].assign(std::size_t(L), 2e-3);                   // stage 1's ranks twice as slow
  EXPECT_EQ(nn::balanced_cut(*m, ms).begin(1), scan(ms));
  EXPECT_GT(nn::balanced_cut(*m, ms).begin(1), L / 2) << "the slow stage gets fewer nodes";
  std::swap(ms[0], ms[1]);  // now stage 0's ranks are the slow ones
  EXPECT_EQ(nn::balanced_cut(*m, ms).begin(1), scan(ms));
  EXPECT_LT(nn::balanced_cut(*m, ms).begin(1), L / 2);
  // The start-up line prices each stage by its own row: node 0 on stage 0's slow ranks.
  const std::string d = nn::describe_cut(*m, nn::StageCut{{0, 1, L}}, ms);
  EXPECT_NE(d.find("(2.00 ms a micro-batch)"), std::string::npos) << d;
  EXPECT_NE(error_of([&] { nn::balanced_cut(*m, std::vector<std::vector<double>>(2, std::vector<double>(3, 1.0))); })
                .find("3 node costs for a model of"),
            std::string::npos);
}

// --pp-balance time's choice: the work-balanced cut (the rows' mean) unless each stage's own row shortens
// the slowest stage by more than the noise margin (5%).
TEST(PipelineStages, StagePricedCutMovesOnlyForAClearGain) {
  auto m = nn::make_model("lenet5");  // 7 nodes, every boundary a chain point
  ASSERT_EQ(m->layers().size(), 7u);
  // Costs without ties: the work-balanced cut is at node 4 (13 | 12.5 ms).
  const std::vector<double> ms{10e-3, 1e-3, 1e-3, 1e-3, 1.5e-3, 1e-3, 10e-3};
  std::vector<std::vector<double>> rows{ms, ms};
  EXPECT_EQ(train::stage_priced_cut(*m, rows).begin(1), 4);
  for (double& t : rows[1]) t *= 1.2;  // stage 1's ranks 20% slower: node 5 would gain 3.3% (15 -> 14.5 ms)
  EXPECT_EQ(nn::balanced_cut(*m, rows).begin(1), 5);
  EXPECT_EQ(train::stage_priced_cut(*m, rows).begin(1), 4) << "within the 15% margin: the cut stays";
  EXPECT_EQ(train::stage_priced_cut(*m, rows, 0.01).begin(1), 5) << "a smaller margin follows it";
  rows[1] = ms;
  for (double& t : rows[1]) t *= 2.0;  // twice as slow: node 6 gains 20% (25 -> 20 ms)
  const nn::StageCut moved = train::stage_priced_cut(*m, rows);
  EXPECT_EQ(moved.begin(1), 6);
  EXPECT_NEAR(train::slowest_stage(moved, rows), 20e-3, 1e-12);
  EXPECT_NEAR(train::slowest_stage(nn::StageCut{{0, 4, 7}}, rows), 25e-3, 1e-12);
}

// nn/node_timing.h: one positive time a node; the whole model's costliest node is a convolution or a
// linear, never a ReLU (resnet18: its nodes differ by orders of magnitude, far past timing noise).
TEST(PipelineStages, NodeTimesCoverEveryNode) {
  auto m = nn::make_model("resnet18");
  m->init_parameters(1);
  const std::vector<double> t = nn::time_nodes(*m, ops::kernels_for(ops::default_isa()), 2, 1);
  ASSERT_EQ(t.size(), m->layers().size());
  for (double s : t) EXPECT_GT(s, 0.0);
  const std::size_t worst = std::size_t(std::max_element(t.begin(), t.end()) - t.begin());
  const std::string& name = m->layers()[worst]->name();
  EXPECT_EQ(name.find("relu"), std::string::npos) << name;
  EXPECT_NE(error_of([&] { nn::time_nodes(*m, ops::kernels_for(ops::default_isa()), 0, 1); }), "");
}

// The bubble report: the mean idle fraction over the timed steps, and the median step's (0.1% bins).
TEST(PipelineStages, BubbleStatsKeepMeanAndMedianStep) {
  train::PipelineStats st;
  EXPECT_EQ(st.median_step_idle_fraction(), 0.0);
  st.add_step(0.010, 0.001);  // 10%
  st.add_step(0.010, 0.0012);  // 12%
  st.add_step(0.060, 0.051);  // 85%: a step the machine took the core from
  EXPECT_EQ(st.steps, 3);
  EXPECT_NEAR(st.idle_fraction(), 0.0532 / 0.080, 1e-12);
  EXPECT_DOUBLE_EQ(st.median_step_idle_fraction(), 0.12);
  st.add_step(0.010, 0.0);  // four steps: the lower median
  EXPECT_DOUBLE_EQ(st.median_step_idle_fraction(), 0.10);
}

TEST(PipelineStages, BadCutsAreOneLineErrors) {
  auto m = nn::make_model("lenet5");
  const int L = int(m->layers().size());
  EXPECT_NE(error_of([&] { nn::balanced_cut(*m, L + 1); }).find("chain point"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::parse_cut("x", *m, 2); }).find("is not a node index"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::parse_cut("0", *m, 2); }).find("does not start a later"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::parse_cut(std::to_string(L), *m, 2); }).find("does not start a later"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::parse_cut("2,1", *m, 3); }).find("does not start a later"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::parse_cut("1", *m, 3); }).find("gives 2 stage(s), --pp is 3"), std::string::npos);
  EXPECT_EQ(nn::parse_cut("1,3", *m, 3).begins, (std::vector<int>{0, 1, 3, L}));
  auto r = nn::make_model("resnet18");
  int inside = -1;  // a node inside a residual block
  for (std::size_t i = 0; i < r->layers().size() && inside < 0; ++i)
    if (ends_with(r->layers()[i]->name(), "layer2.0.bn1")) inside = int(i);
  ASSERT_GE(inside, 0);
  const std::string e = error_of([&] { nn::parse_cut(std::to_string(inside), *r, 2); });
  EXPECT_NE(e.find("is not a chain point"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

// The whole model vs its stages chained by hand (activations forward, input gradients back): the same
// logits, parameter gradients and running statistics, bit for bit, under the names of the whole model.
void expect_stages_compute_the_whole(const std::string& name, const std::vector<int>& begins, int N) {
  const auto& k = ops::kernels_for(ops::default_isa());
  auto whole = nn::make_model(name);
  whole->init_parameters(7);
  const nn::StageCut cut{begins};
  const int P = cut.stages();
  std::vector<std::unique_ptr<nn::Model>> stages;
  for (int s = 0; s < P; ++s) {
    auto copy = nn::make_model(name);
    copy->init_parameters(7);
    stages.push_back(nn::take_stage(std::move(copy), cut, s));
    stages.back()->set_input_gradient(s > 0);
    stages.back()->reserve(N);
  }
  whole->reserve(N);
  const std::size_t in = std::size_t(shape_numel(whole->input_shape()));
  std::vector<float> x(std::size_t(N) * in), dlogits(std::size_t(N) * 10);
  Rng rng(3);
  for (float& v : x) v = rng.uniform(0.0f, 1.0f);
  for (float& v : dlogits) v = rng.uniform(-0.1f, 0.1f);
  const float* logits = whole->forward(k, x.data(), N);
  std::vector<float> want(logits, logits + std::size_t(N) * 10);
  whole->backward(k, x.data(), dlogits.data(), N);

  std::vector<std::vector<float>> inputs{x};
  for (int s = 0; s < P; ++s) {
    const float* out = stages[std::size_t(s)]->forward(k, inputs.back().data(), N);
    const std::size_t n = std::size_t(N) * std::size_t(shape_numel(stages[std::size_t(s)]->value_shape(
                                                int(stages[std::size_t(s)]->layers().size()))));
    inputs.emplace_back(out, out + n);
  }
  ASSERT_EQ(inputs.back().size(), want.size());
  EXPECT_EQ(std::memcmp(inputs.back().data(), want.data(), want.size() * sizeof(float)), 0) << name << ": logits";
  std::vector<float> dout = dlogits;
  for (int s = P - 1; s >= 0; --s) {
    nn::Model& st = *stages[std::size_t(s)];
    st.backward(k, inputs[std::size_t(s)].data(), dout.data(), N);
    if (s > 0) dout.assign(st.input_grad(), st.input_grad() + inputs[std::size_t(s)].size());
  }
  std::size_t seen = 0;
  for (int s = 0; s < P; ++s) {
    const nn::ParameterSet& p = stages[std::size_t(s)]->params();
    for (const auto& v : p.views()) {
      const auto& w = whole->params().view(v.name);
      ASSERT_EQ(w.numel, v.numel) << v.name;
      EXPECT_EQ(std::memcmp(p.grads() + v.offset, whole->params().grads() + w.offset, v.numel * sizeof(float)), 0)
          << name << ": gradient of " << v.name << " (stage " << s << ")";
      ++seen;
    }
    for (const auto& b : p.buffer_views()) {
      for (const auto& wb : whole->params().buffer_views()) {
        if (wb.name != b.name || b.int64) continue;
        EXPECT_EQ(std::memcmp(p.buffers() + b.offset, whole->params().buffers() + wb.offset, b.numel * sizeof(float)), 0)
            << name << ": " << b.name;
      }
    }
  }
  EXPECT_EQ(seen, whole->params().views().size()) << name << ": every parameter on exactly one stage";
}

TEST(PipelineStages, StagesComputeTheWholeModel) {
  auto lenet = nn::make_model("lenet5");
  const int L = int(lenet->layers().size());
  expect_stages_compute_the_whole("lenet5", nn::balanced_cut(*lenet, 2).begins, 16);
  expect_stages_compute_the_whole("lenet5", {0, 1, L}, 16);  // uneven
  auto vit = nn::make_model("vit");
  expect_stages_compute_the_whole("vit", nn::balanced_cut(*vit, 3).begins, 4);
  auto resnet = nn::make_model("resnet18");
  // Stage 1 starts at a block with a downsample: its input is read twice (conv1 and downsample.0).
  int down = -1;
  for (std::size_t i = 0; i < resnet->layers().size() && down < 0; ++i)
    if (resnet->layers()[i]->name() == "layer2.0.conv1") down = int(i);
  ASSERT_GT(down, 0);
  expect_stages_compute_the_whole("resnet18", {0, down, int(resnet->layers().size())}, 4);
}

// A pipeline stage holding K micro-batches runs K copies of its model on one ParameterSet
// (Model::share_parameters) and one set of value gradients (Model::share_value_gradients): two
// micro-batches forwarded one after the other and run backward in order on two copies give the gradients,
// input gradients (and running statistics) of one model running each forward right before its backward;
// the copy counts only its activations, and its attention layers use the first copy's backward workspaces;
// another model's parameters or values are refused; forward's node hook runs once a node.
TEST(PipelineStages, CopiesShareParametersAndKeepTheirOwnActivations) {
  const auto& k = ops::kernels_for(ops::default_isa());
  for (const std::string name : {"resnet18", "vit"}) {
    const int N = 4;
    auto ref = nn::make_model(name), first = nn::make_model(name), second = nn::make_model(name);
    ref->init_parameters(9);
    first->init_parameters(9);
    second->init_parameters(1);  // its own values are dropped by share_parameters
    second->share_parameters(*first);
    EXPECT_EQ(&second->params(), &first->params());
    second->reserve(1);  // the shared buffers grow to the largest sharer's batch, whoever reserves first
    second->share_value_gradients(*first);
    for (auto* m : {ref.get(), first.get(), second.get()}) {
      m->set_input_gradient(true);
      m->reserve(N);
    }
    EXPECT_LT(second->activation_floats(), first->activation_floats()) << name << ": gradients counted once";
    int shared = 0;
    for (std::size_t i = 0; i < first->layers().size(); ++i)
      if (auto* a = dynamic_cast<const nn::MultiheadSelfAttention*>(first->layers()[i].get())) {
        const auto* b = dynamic_cast<const nn::MultiheadSelfAttention*>(second->layers()[i].get());
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(a->backward_scratch(), b->backward_scratch()) << name << ": one set of attention workspaces";
        ++shared;
      }
    EXPECT_EQ(shared, name == "vit" ? 6 : 0) << name;
    const std::size_t in = std::size_t(shape_numel(ref->input_shape()));
    std::vector<float> x(2 * N * in), dl(2 * N * 10), sum_ref, sum_copies;
    Rng rng(4);
    for (float& v : x) v = rng.uniform(0.0f, 1.0f);
    for (float& v : dl) v = rng.uniform(-0.1f, 0.1f);
    const float* x0 = x.data();
    const float* x1 = x.data() + N * in;
    auto grads_of = [](nn::Model& m) { return std::vector<float>(m.params().grads(), m.params().grads() + m.params().size()); };
    auto add = [](std::vector<float>& acc, const std::vector<float>& g) {
      if (acc.empty()) acc.assign(g.size(), 0.0f);
      for (std::size_t i = 0; i < g.size(); ++i) acc[i] += g[i];
    };
    auto input_grad_of = [&](nn::Model& m) { return std::vector<float>(m.input_grad(), m.input_grad() + N * in); };
    int nodes = 0;
    ref->forward(k, x0, N);
    ref->backward(k, x0, dl.data(), N);
    add(sum_ref, grads_of(*ref));
    const std::vector<float> dx0 = input_grad_of(*ref);
    ref->forward(k, x1, N);
    ref->backward(k, x1, dl.data() + N * 10, N);
    add(sum_ref, grads_of(*ref));
    const std::vector<float> dx1 = input_grad_of(*ref);
    first->forward(k, x0, N, [&] { ++nodes; });
    second->forward(k, x1, N);  // first's activations stay put
    first->backward(k, x0, dl.data(), N);
    add(sum_copies, grads_of(*first));
    EXPECT_EQ(input_grad_of(*first), dx0) << name;
    second->backward(k, x1, dl.data() + N * 10, N);
    add(sum_copies, grads_of(*second));
    EXPECT_EQ(input_grad_of(*second), dx1) << name;
    EXPECT_EQ(second->input_grad(), first->input_grad()) << name << ": one input-gradient buffer";
    EXPECT_EQ(nodes, int(first->layers().size())) << name;
    EXPECT_EQ(std::memcmp(sum_ref.data(), sum_copies.data(), sum_ref.size() * sizeof(float)), 0) << name;
    EXPECT_EQ(std::memcmp(ref->params().buffers(), first->params().buffers(), ref->params().buffer_floats() * sizeof(float)), 0)
        << name << ": running statistics";
  }
  auto lenet = nn::make_model("lenet5"), vit = nn::make_model("vit");
  EXPECT_NE(error_of([&] { lenet->share_parameters(*vit); }).find("cannot share the parameters"), std::string::npos);
  EXPECT_NE(error_of([&] { lenet->share_value_gradients(*vit); }).find("cannot share the value gradients"),
            std::string::npos);
}

TEST(PipelineSchedule, EveryMicroBatchOnceInOrderWithinBounds) {
  for (auto sched : {train::PipeSchedule::GPipe, train::PipeSchedule::OneFOneB})
    for (int P = 1; P <= 4; ++P)
      for (int M = 1; M <= 9; ++M)
        for (int s = 0; s < P; ++s) {
          const auto a = train::stage_actions(sched, P, s, M);
          ASSERT_EQ(int(a.size()), 2 * M);
          int f = 0, b = 0;
          for (const auto& x : a) {
            if (x.forward) {
              EXPECT_EQ(x.micro, f++);
            } else {
              EXPECT_EQ(x.micro, b++);
              EXPECT_LT(x.micro, f) << "backward before its forward";
            }
          }
          const int held = train::max_in_flight(a);
          if (sched == train::PipeSchedule::GPipe)
            EXPECT_EQ(held, M);
          else
            EXPECT_EQ(held, std::min(P - s, M)) << "P=" << P << " s=" << s << " M=" << M;
        }
  EXPECT_EQ(train::parse_pp_schedule("1f1b"), train::PipeSchedule::OneFOneB);
  EXPECT_EQ(train::parse_pp_schedule("gpipe"), train::PipeSchedule::GPipe);
  EXPECT_NE(error_of([] { train::parse_pp_schedule("zb"); }).find("--pp-schedule must be gpipe or 1f1b"), std::string::npos);
}

// Every stage runs its actions in order, a forward once the stage before has sent that micro-batch, a
// backward once the stage after has sent its gradient; forward costs 1, backward 2, messages nothing.
// Both schedules finish (no deadlock) in (M + P - 1) x 3: each stage idles (P-1)/(M+P-1) of the time.
TEST(PipelineSchedule, UnitCostSimulationHasTheIdealBubble) {
  for (auto sched : {train::PipeSchedule::GPipe, train::PipeSchedule::OneFOneB})
    for (int P = 1; P <= 4; ++P)
      for (int M = 1; M <= 8; ++M) {
        std::vector<std::vector<train::PipeAction>> acts;
        for (int s = 0; s < P; ++s) acts.push_back(train::stage_actions(sched, P, s, M));
        std::vector<std::vector<double>> fdone(P, std::vector<double>(M, -1)), bdone(P, std::vector<double>(M, -1));
        std::vector<std::size_t> next(P, 0);
        std::vector<double> clock(P, 0.0);
        for (bool moved = true; moved;) {
          moved = false;
          for (int s = 0; s < P; ++s) {
            if (next[s] == acts[s].size()) continue;
            const auto& a = acts[s][next[s]];
            double ready;
            if (a.forward)
              ready = s == 0 ? 0.0 : fdone[s - 1][a.micro];
            else
              ready = s == P - 1 ? fdone[s][a.micro] : bdone[s + 1][a.micro];
            if (ready < 0) continue;
            const double start = std::max(clock[s], ready);
            clock[s] = start + (a.forward ? 1.0 : 2.0);
            (a.forward ? fdone : bdone)[s][a.micro] = clock[s];
            ++next[s];
            moved = true;
          }
        }
        for (int s = 0; s < P; ++s) ASSERT_EQ(next[s], acts[s].size()) << "deadlock: P=" << P << " M=" << M;
        const double span = *std::max_element(clock.begin(), clock.end());
        EXPECT_DOUBLE_EQ(span, 3.0 * (M + P - 1)) << train::pp_schedule_name(sched) << " P=" << P << " M=" << M;
        EXPECT_DOUBLE_EQ(1.0 - 3.0 * M / span, train::ideal_bubble(P, M));
      }
}

}  // namespace
