// bench_train_step --layers: where one training step's time goes, per node of a zoo model and per pass, on one
// thread (its CPU time) or, with threads > 1, on the calling thread's wall clock (its hooks see the node end on
// that thread, the wait for the others' slices included; the peak is then threads x one core's), with each pass's FLOPs (the layers' own counts: Layer::forward_macs,
// Model::backward_macs), its GFLOP/s and its share of this core's measured fp32 peak (core/peak.h, bench_peak's loop).
// The steps are timed by nn::time_pass (nn/node_timing.h), the timer the pipeline's --pp-balance time uses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::bench {

struct ProfileOptions {
  std::string model = "lenet5";                   // nn::make_model's name
  std::vector<ops::Precision> precisions;         // one model each, stepped alternately; the first is the main one
  ops::IsaLevel level = ops::IsaLevel::Ref;
  int batch = 64;
  int threads = 1;                                // Model::set_threads; above 1 the times are wall seconds
  int steps = 0;                                  // timed steps; 0: about 300 GFLOP of work, 10 to 400 steps
};

// x: nbatches batches of `batch` 1x28x28 images (cycled), y their labels. Prints the tables; returns 0.
int profile_train_step(const ProfileOptions& o, const std::vector<float>& x, const std::vector<uint8_t>& y,
                       int nbatches);

}  // namespace ringtrain::bench
