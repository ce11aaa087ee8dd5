// Gradient accumulation over the micro-batches of one step (--micro-batches M, TrainConfig::micro_batches).
// Model::backward writes (never adds) the parameter gradients, so the earlier micro-batches' gradients are
// summed in a buffer of their own beside the model's: the first micro-batch starts the sum, the middle ones
// add to it, and the last one's gradients get it added - layer by layer, inside that backward's
// gradient-ready hook, so the data-parallel GradReducer still sees each bucket complete as backward leaves
// its layers and all-reduces it once a step, overlapping the last backward. The gradients end as
// g_last + (((g_0 + g_1) + g_2) ...), the same order every step.
#pragma once
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::train {

class GradAccumulator {
 public:
  // params: the model's; the sum is laid out as its gradient buffer. The adds run on k's add kernel (the
  // same float adds as a plain loop, at the kernels' vector width).
  GradAccumulator(nn::ParameterSet& params, const ops::KernelTable& k);
  // After micro-batch 0's backward: sum = gradients.
  void start();
  // After a middle micro-batch's backward: sum += gradients.
  void add();
  // The last micro-batch: gradients += sum, for the views given (a layer's), or all of them.
  void finish(const std::vector<int>& views);
  void finish_all();
  // A hook for the last micro-batch's backward: finish(layer's parameters), then `next` (the reducer's).
  nn::Model::GradReadyHook finishing(nn::Model::GradReadyHook next);

 private:
  enum class Op { Start, Add, Finish };
  void apply(const std::vector<int>& views, Op op);
  nn::ParameterSet& params_;
  const ops::KernelTable& k_;
  AlignedBuffer<float> sum_;
  std::vector<int> all_views_;
};

// Samples [begin, end) of micro-batch m of M in a batch of N: [N m / M, N (m+1) / M) (an epoch's short last
// batch is cut as evenly as it goes).
struct MicroBatchRange {
  int begin, end;
  int size() const { return end - begin; }
};
MicroBatchRange micro_batch(int N, int M, int m);

}  // namespace ringtrain::train
