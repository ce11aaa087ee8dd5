// --pp-balance time: the pipeline's stage cut from node times measured at start. Every rank times the whole
// model's nodes on one micro-batch (nn/node_timing.h); the times are averaged over the ranks (a rank whose
// core is busy with something else for a moment weighs 1/W, not a whole stage), and world rank 0 computes
// the balanced cut and broadcasts it, so every rank - every data-parallel replica of every stage - runs the
// same cut. The cut decides which rank runs which layers, never what is computed: a pipelined run keeps
// one process's bits whatever the cut.
#pragma once
#include <string>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/nn/pipeline_stages.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::train {

struct MeasuredCut {
  nn::StageCut cut;
  std::vector<double> seconds;  // per node of the whole model: a micro-batch's forward + backward, rank 0's view
};

// Collective over `world` (every rank calls it): the zoo model `model_name` (a private copy is built and
// timed) cut into P stages, balanced by its nodes' times on micro-batches of `micro_batch` samples.
MeasuredCut measured_cut(const std::string& model_name, const ops::KernelTable& k, int micro_batch, int P,
                         dist::Communicator& world);

}  // namespace ringtrain::train
