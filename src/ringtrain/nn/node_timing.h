// What each node of a model costs in time on this rank: the measured input of the pipeline's balanced cut
// under --pp-balance time (nn/pipeline_stages.h). The layers' cost counts (Model::node_cost) miss what the
// kernels do with a shape - resnet18's late 3x3 convs on 2x2-4x4 maps run far below the early ones' speed -
// and a machine's cores need not run at one speed, so the stages are balanced by the seconds they take on
// the ranks that will run them.
#pragma once
#include <vector>

#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::nn {

// Seconds node i of `model` takes for one training pass (forward + backward, parameter gradients and the
// gradient of its input included) on a batch of `batch` synthetic samples, one thread: the median of
// `repeats` timed passes after one untimed one (first-touch). Uses the model's own buffers (reserve(batch)
// on it; its gradients are overwritten, its parameters and batch-norm statistics are not used after).
std::vector<double> time_nodes(Model& model, const ops::KernelTable& k, int batch, int repeats);

}  // namespace ringtrain::nn
