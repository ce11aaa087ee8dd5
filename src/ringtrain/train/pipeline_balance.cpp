#include "ringtrain/train/pipeline_balance.h"

#include <algorithm>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"

namespace ringtrain::train {

std::vector<std::vector<double>> stage_times(const std::vector<double>& mine, int P, dist::Communicator& world) {
  const int W = world.size();
  check(P >= 1 && W % P == 0, "pipeline: --pp " + std::to_string(P) + " does not divide the world size " +
                                  std::to_string(W));
  const std::size_t L = mine.size();
  const int per_stage = W / P;  // ranks a stage (its dp x tp replicas)
  // One row a stage; each rank adds its times to its own stage's row, and the sums are averaged.
  std::vector<double> rows(std::size_t(P) * L, 0.0);
  const std::size_t row = std::size_t(world.rank() / per_stage) * L;
  for (std::size_t i = 0; i < L; ++i) rows[row + i] = mine[i];
  world.allreduce_sum(rows.data(), rows.size());
  for (double& t : rows) t /= per_stage;
  // One rank decides and tells the others (a sum's last bits may differ between ranks; a cut must not).
  world.broadcast(rows.data(), rows.size() * sizeof(double), 0);
  std::vector<std::vector<double>> out;
  for (int s = 0; s < P; ++s)
    out.emplace_back(rows.begin() + std::ptrdiff_t(std::size_t(s) * L), rows.begin() + std::ptrdiff_t(std::size_t(s + 1) * L));
  return out;
}

double slowest_stage(const nn::StageCut& cut, const std::vector<std::vector<double>>& rows) {
  const std::vector<double> sums = nn::stage_sums(cut, rows);
  return sums.empty() ? 0.0 : *std::max_element(sums.begin(), sums.end());
}

nn::StageCut stage_priced_cut(const nn::Model& model, const std::vector<std::vector<double>>& rows, double min_gain) {
  check(!rows.empty(), "pipeline: no stage rows to cut by");
  std::vector<double> mean(rows[0].size(), 0.0);
  for (const auto& r : rows) {
    check(r.size() == mean.size(), "pipeline: stage rows of different lengths");
    for (std::size_t i = 0; i < r.size(); ++i) mean[i] += r[i] / double(rows.size());
  }
  const nn::StageCut even = nn::balanced_cut(model, mean, int(rows.size()));
  const nn::StageCut own = nn::balanced_cut(model, rows);
  return slowest_stage(own, rows) < (1.0 - min_gain) * slowest_stage(even, rows) ? own : even;
}

namespace {
constexpr int kWarmupPasses = 3, kTimedPasses = 9;
}  // namespace

MeasuredCut measured_cut(const std::string& model_name, const ops::KernelTable& k, int micro_batch, int P,
                         dist::Communicator& world) {
  auto model = nn::make_model(model_name);
  model->init_parameters(0);  // realistic values (zeros could take other paths through ReLU and pooling)
  // Warm up, time together, and price each node by its fastest pass. A rank's first passes run up to 40%
  // slower (first touch, the other ranks still starting beside it), a shared machine takes a core for a
  // while now and then, and a stage is priced by its own ranks' row: with the median of 5 passes right after
  // one untimed pass, such a moment showed as a slower core and put vit's cut half an encoder layer off
  // the balance in 2 runs of 6 (docs/BENCHMARKS.md, "Emerald Rapids: the pipeline's cut steadied, ...").
  nn::time_nodes(*model, k, micro_batch, kWarmupPasses);  // its untimed pass + kWarmupPasses, all discarded
  world.barrier();
  MeasuredCut m;
  m.seconds = stage_times(nn::time_node_passes(*model, k, micro_batch, kTimedPasses).fastest, P, world);
  m.cut = stage_priced_cut(*model, m.seconds);
  return m;
}

}  // namespace ringtrain::train
