// Evaluation of a model on a dataset split: mean loss, accuracy and the confusion matrix.
// With a communicator, each rank evaluates its own contiguous, non-overlapping part of the split and
// the counts are summed, so every test sample is counted exactly once whatever the world size.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ringtrain/data/dataset.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/nn/model.h"

namespace ringtrain::train {

struct EvalResult {
  int classes = 0;        // the model's output classes
  int64_t samples = 0;
  int64_t correct = 0;
  double loss_sum = 0.0;  // sum of per-sample losses
  std::vector<int64_t> confusion;  // classes x classes, [true][predicted]
  int64_t confusion_at(int label, int predicted) const { return confusion[std::size_t(label) * classes + predicted]; }
  std::vector<uint8_t> predictions;  // this rank's predictions, in split order (filled on request)
  std::vector<float> losses;         // and each sample's cross-entropy loss (filled with predictions)
  double accuracy() const { return samples ? double(correct) / double(samples) : 0.0; }
  double mean_loss() const { return samples ? loss_sum / double(samples) : 0.0; }
};

// Evaluates the whole split in eval mode (batch norm on its running statistics, no dropout; the model's
// mode is restored after). If keep_predictions, fills predictions for all samples (gathered by the caller
// only on one process: predictions are those of this rank's part when size() > 1). batch_size 0: 500
// samples, fewer where their activations would pass 256 MiB. A label the model has no class for is an
// error naming the sample.
EvalResult evaluate(nn::Model& model, const ops::KernelTable& kernels, const data::Split& split,
                    dist::Communicator& comm, int batch_size = 0, bool keep_predictions = false);

// evaluate()'s pieces, shared with the pipeline's evaluation (train/pipeline_engine.h):
// samples [begin, end) of a split of `count` that rank `rank` of `size` evaluates;
struct EvalShard {
  int64_t begin = 0, end = 0;
};
EvalShard eval_shard(int64_t count, int rank, int size);
// the default batch (batch_size 0 above) for a model's activations;
int default_eval_batch(const nn::Model& model);
// counts N samples' logits [N, r.classes] into r, the labels those of samples first.. of `split`;
void count_logits(EvalResult& r, const float* logits, const data::Split& split, int64_t first, int N,
                  bool keep_predictions);
// sums the counts over comm's ranks (predictions stay each rank's own).
void sum_counts(EvalResult& r, dist::Communicator& comm);
// An empty result for K classes.
EvalResult empty_result(int classes);

}  // namespace ringtrain::train
