// --pp-balance time: the pipeline's stage cut from node times measured at start. Every rank times the whole
// model's nodes on one micro-batch (nn/node_timing.h); stage s is priced by the times measured on the ranks
// that will run it (averaged over its data-parallel and tensor replicas), so a stage on clearly slower cores
// gets less work (stage_priced_cut: only past a 15% gain, the timing noise). World rank 0's times decide, so
// every rank - every data-parallel replica of every stage - runs the same cut. The cut decides which rank runs
// which layers, never what is computed: a pipelined run keeps one process's bits whatever the cut.
#pragma once
#include <string>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/nn/pipeline_stages.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::train {

struct MeasuredCut {
  nn::StageCut cut;
  // seconds[s][i]: node i of the whole model, a micro-batch's forward + backward, on stage s's ranks
  // (rank 0's copy, the one the cut was made from)
  std::vector<std::vector<double>> seconds;
};

// The cut from per-stage rows (rows[s][i]: node i on stage s's ranks): the cut balanced by the rows' mean
// (the work), unless the cut balanced by each stage's own row shortens the slowest stage, priced by the
// rows, by more than `min_gain` (a fraction). Timing at start is noisy: on a VM whose cores drift by a few
// percent for seconds at a time, following every difference moved vit's cut by half an encoder layer
// either way run to run and made the bubble worse, and on another VM one rank's whole timing window now
// and then ran 35% slow (a 12% "gain" for vit's next chain point); a persistent difference (another CPU,
// a busy host) still moves it.
nn::StageCut stage_priced_cut(const nn::Model& model, const std::vector<std::vector<double>>& rows,
                              double min_gain = 0.15);
// The slowest stage's time under cut, stage s priced by rows[s].
double slowest_stage(const nn::StageCut& cut, const std::vector<std::vector<double>>& rows);

// Collective over `world`: each stage's row of node times, the average of the rows `mine` its ranks measured
// (world rank w runs stage w / (world size / P)), rank 0's copy on every rank. rows[s][i]: node i on stage s.
std::vector<std::vector<double>> stage_times(const std::vector<double>& mine, int P, dist::Communicator& world);

// Collective over `world` (every rank calls it): the zoo model `model_name` (a private copy is built and
// timed) cut into P stages, balanced by its nodes' times on micro-batches of `micro_batch` samples. World
// rank w runs stage w / (world size / P) (dist/process_grid.h: the pipeline coordinate is the slowest).
MeasuredCut measured_cut(const std::string& model_name, const ops::KernelTable& k, int micro_batch, int P,
                         dist::Communicator& world);

}  // namespace ringtrain::train
