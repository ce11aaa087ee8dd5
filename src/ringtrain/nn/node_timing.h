// What each node of a model costs in time: the one per-node timer. The pipeline's balanced cut under
// --pp-balance time (nn/pipeline_stages.h) takes time_node_passes' fastest; the bench tools take it too (bench_zoo_nodes:
// per node and kind of layer at several precisions; bench_train_step --layers: a real step's passes through
// time_pass, with FLOPs and % of peak). The layers' cost counts (Model::node_cost) miss what the kernels do
// with a shape - resnet18's late 3x3 convs on 2x2-4x4 maps run far below the early ones' speed - and a
// machine's cores need not run at one speed, so the stages are balanced by the seconds they take on the
// ranks that will run them.
//
// Nodes are timed through the Model's own hooks (forward's after_node, backward's gradient-ready hook, both
// called on the calling thread after each node), so a node's time is everything the pass spends on it, the
// summing of a residual value's gradients included. One thread: under Model::set_threads the hooks see only
// the calling thread's slice.
#pragma once
#include <functional>
#include <vector>

#include "ringtrain/core/peak.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::nn {

// A clock in seconds: bench::wall_seconds, or bench::thread_cpu_seconds (core/peak.h) for the time the thread
// actually ran on a shared machine.
using SecondsClock = double (*)();

// One training pass, node by node. The parts follow each other on the clock, so forward + loss + backward +
// after sum to total.
struct PassTimes {
  std::vector<double> forward, backward;  // [node] seconds
  double loss = 0.0;                      // the loss callback (logits to their gradient)
  double after = 0.0;                     // the after callback (an optimizer step), 0 without one
  double total = 0.0;                     // the whole pass on the clock
  double wall = 0.0;                      // the whole pass in wall seconds (= total on wall_seconds)
};

// The loss of a pass: given the logits [batch, classes], returns their gradient (valid until the backward ends).
using LossGradient = std::function<const float*(const float* logits)>;

// One timed pass of `model` on x [batch, input...]: forward, loss(logits), backward, then after() if given.
// The model's mode, step context and threads are the caller's; reserve(batch) is called.
PassTimes time_pass(Model& model, const ops::KernelTable& k, const float* x, int batch, const LossGradient& loss,
                    const std::function<void()>& after = {}, SecondsClock clock = bench::wall_seconds);

// Per node, the median over the timed passes: forward, backward, and their sum (each pass's forward +
// backward, then the median: time_nodes' figure; with one pass exactly forward + backward).
struct NodeTimes {
  std::vector<double> forward, backward, total;
  // Per node, the fastest pass's forward + backward: what the node costs when nothing else takes the core
  // (a shared machine's interruptions only ever add time).
  std::vector<double> fastest;
};

// Node i of `model` for one training pass (forward + backward, parameter gradients and the gradient of its
// input included) on a batch of `batch` synthetic samples (pixels in [0, 1), small logit gradients), in
// training mode: the median of `repeats` timed passes after one untimed one (first-touch). Uses the model's
// own buffers (reserve(batch) on it; its gradients are overwritten, its parameters and batch-norm statistics
// are not used after); its training mode is restored.
NodeTimes time_node_passes(Model& model, const ops::KernelTable& k, int batch, int repeats,
                           SecondsClock clock = bench::wall_seconds);

// time_node_passes(...).total on the wall clock. (The pipeline's cut takes .fastest: train/pipeline_balance.cpp.)
std::vector<double> time_nodes(Model& model, const ops::KernelTable& k, int batch, int repeats);

// The median of v (the mean of the middle two for an even count); 0 for none.
double median_seconds(std::vector<double> v);

}  // namespace ringtrain::nn
