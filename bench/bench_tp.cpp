// Tensor parallelism in the training step: LeNet-5 steps (fast kernels, synthetic data, Adam) on the
// same W ranks arranged as dp x tp grids - tp=1 (pure data parallelism, W ranks each with the whole
// model) against tp=T (fc1/fc2 split over T ranks). Reports per grid: step time, global samples/s, and
// what each rank all-reduces per step: the tensor group's activations (fc2 output forward, fc1 input
// gradient backward, counted in the layers' group) and the data-parallel gradients (GradReducer, the whole
// gradient buffer when dp > 1). "payload" is the buffer each rank hands to all-reduce; a ring moves
// 2(G-1)/G of it out of each rank of a group of G ("sent"). Grids are interleaved in blocks so machine
// noise hits them alike; figures are medians over blocks.
//
//   mpirun -np 2 bench_tp [--batch 64] [--steps 50] [--blocks 5] [--tp 1,2] [--poll spin|yield|adaptive]
// --batch is per data-parallel rank, as `ringtrain train --batch-size` (global batch = batch x dp).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

using namespace ringtrain;
using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  dist::MpiSession mpi(&argc, &argv);
  int B = 64, steps = 50, blocks = 5;
  std::vector<int> tps = {1, 2};
  dist::PollMode poll = dist::PollMode::Yield;  // TensorGroupComm's default
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--batch") B = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--blocks") blocks = std::atoi(argv[i + 1]);
    else if (a == "--poll") {
      const std::string m = argv[i + 1];
      poll = m == "spin" ? dist::PollMode::Spin : m == "adaptive" ? dist::PollMode::Adaptive : dist::PollMode::Yield;
    }
    else if (a == "--tp") {
      tps.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string t; std::getline(ss, t, ',');) tps.push_back(std::atoi(t.c_str()));
    } else {
      std::fprintf(stderr, "bench_tp: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  dist::MpiOptions mo;
  mo.timeout_s = 600;
  dist::MpiCommunicator world(MPI_COMM_WORLD, mo);
  const int W = world.size();
  for (int t : tps)
    if (t < 1 || W % t) {
      if (world.rank() == 0) std::fprintf(stderr, "bench_tp: --tp %d does not divide %d ranks\n", t, W);
      return 2;
    }
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  constexpr int kPixels = 28 * 28, kClasses = 10;
  Rng rng(7);
  std::vector<float> x(std::size_t(B) * kPixels);
  std::vector<uint8_t> y(static_cast<std::size_t>(B));
  for (auto& v : x) v = rng.uniform();
  for (auto& v : y) v = uint8_t(rng.below(kClasses));

  struct Grid {
    int tp;
    std::unique_ptr<dist::ProcessGrid> grid;
    std::unique_ptr<nn::Model> model;
    std::unique_ptr<optim::Adam> adam;
    std::unique_ptr<dist::GradReducer> reducer;
    std::vector<double> step_ms, tp_ms, wait_ms;
    int64_t steps = 0;
  };
  std::vector<Grid> grids;
  auto whole = nn::make_lenet5();
  whole->init_parameters(1);
  for (int t : tps) {
    Grid g;
    g.tp = t;
    g.grid = std::make_unique<dist::ProcessGrid>(world, t, mo);
    g.grid->tensor_group().set_poll(poll);  // how the step waits inside the tensor group's all-reduce
    g.model = nn::make_lenet5_tp(g.grid->tensor_group());
    dist::split_to_shards(whole->params(), whole->params().params(), g.model->params(), g.model->params().params());
    g.model->reserve(B);
    g.adam = std::make_unique<optim::Adam>(g.model->params().size(), optim::AdamOptions{});
    g.reducer = std::make_unique<dist::GradReducer>(g.model->params(), g.grid->dp_comm());
    grids.push_back(std::move(g));
  }
  std::vector<float> probs(std::size_t(B) * kClasses), dlogits(std::size_t(B) * kClasses);
  auto step = [&](Grid& g) {
    auto& p = g.model->params();
    const float* logits = g.model->forward(k, x.data(), B);
    k.softmax_xent_forward(probs.data(), logits, y.data(), B, kClasses);
    k.softmax_xent_backward(dlogits.data(), probs.data(), y.data(), B, kClasses, 1.0f / float(B));
    g.model->backward(k, x.data(), dlogits.data(), B, g.reducer->hook());
    g.reducer->wait();
    g.adam->step(p.params(), p.grads());
  };
  for (auto& g : grids)
    for (int s = 0; s < 5; ++s) step(g);  // warm-up
  for (int b = 0; b < blocks; ++b)
    for (auto& g : grids) {
      g.grid->tensor_group().reset_stats();
      const double wait0 = g.reducer->stats().wait_s;
      world.barrier();
      const auto t0 = Clock::now();
      for (int s = 0; s < steps; ++s) step(g);
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / steps;
      world.allreduce_sum(&ms, 1);  // mean over ranks
      g.step_ms.push_back(ms / W);
      g.tp_ms.push_back(1e3 * g.grid->tensor_group().stats().seconds / steps);
      g.wait_ms.push_back(1e3 * (g.reducer->stats().wait_s - wait0) / steps);
      g.steps = steps;
    }
  if (world.rank() == 0) {
    std::printf("| grid (%d ranks) | global batch | step (ms) | samples/s | tp all-reduce payload / sent (KiB/step/rank) "
                "| in tp all-reduce (ms/step) | dp gradient all-reduce payload / sent (KiB/step/rank) | dp wait (ms/step) |\n",
                W);
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (auto& g : grids) {
      const int T = g.tp, D = W / T;
      const double tp_payload = 4.0 * double(g.grid->tensor_group().stats().floats) / double(g.steps) / 1024.0;
      const double dp_payload = D > 1 ? 4.0 * double(g.model->params().size()) / 1024.0 : 0.0;
      const double ms = median(g.step_ms);
      std::printf("| dp=%d x tp=%d | %d | %.3f | %.0f | %.1f / %.1f | %.3f | %.1f / %.1f | %.3f |\n", D, T, B * D, ms,
                  1e3 * B * D / ms, tp_payload, tp_payload * 2.0 * (T - 1) / T, median(g.tp_ms), dp_payload,
                  dp_payload * 2.0 * (D - 1) / D, median(g.wait_ms));
    }
    std::printf("(medians of %d blocks of %d steps; kernels %s; batch %d per data-parallel rank; main thread polls by %s)\n",
                blocks, steps, ops::isa_name(k.level), B, poll == dist::PollMode::Spin ? "spinning" : poll == dist::PollMode::Adaptive ? "spinning 50 us, then yielding" : "yielding");
  }
  return 0;
}
