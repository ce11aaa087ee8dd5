#include "ringtrain/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/loader.h"

namespace ringtrain::train {

EvalShard eval_shard(int64_t count, int rank, int size) {
  // Contiguous shard of this rank: [begin, end). No padding, no duplicates.
  return {count * rank / size, count * (rank + 1) / size};
}

int default_eval_batch(const nn::Model& model) {
  // 500 samples, or fewer when their activations (and the gradients reserve() sizes beside them) would
  // pass 256 MiB.
  int64_t per_sample = 0;
  for (std::size_t v = 1; v <= model.layers().size(); ++v) per_sample += shape_numel(model.value_shape(int(v)));
  int batch_size = int(std::clamp<int64_t>((int64_t(256) << 20) / (8 * std::max<int64_t>(per_sample, 1)), 16, 500));
  return std::max(batch_size, std::min(model.max_batch(), 500));
}

EvalResult empty_result(int classes) {
  EvalResult r;
  r.classes = classes;
  r.confusion.assign(std::size_t(classes) * classes, 0);
  return r;
}

void count_logits(EvalResult& r, const float* logits, const data::Split& split, int64_t first, int N,
                  bool keep_predictions) {
  const int K = r.classes;
  for (int n = 0; n < N; ++n) {
    const float* row = logits + int64_t(n) * K;
    const int label = split.labels[std::size_t(first + n)];
    if (label >= K)
      throw Error("evaluation: sample " + std::to_string(first + n) + " has label " + std::to_string(label) +
                  " but the model has " + std::to_string(K) + " classes");
    int best = int(std::max_element(row, row + K) - row);
    float maxv = row[best];
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(double(row[k] - maxv));
    const double loss = -(double(row[label] - maxv) - std::log(sum));
    r.loss_sum += loss;
    r.correct += best == label;
    r.confusion[std::size_t(label) * K + best] += 1;
    if (keep_predictions) {
      r.predictions.push_back(uint8_t(best));
      r.losses.push_back(float(loss));
    }
  }
  r.samples += N;
}

void sum_counts(EvalResult& r, dist::Communicator& comm) {
  // Sum counts over ranks: samples, correct, loss and the confusion matrix in one call each.
  std::vector<int64_t> counts(2 + r.confusion.size());
  counts[0] = r.samples;
  counts[1] = r.correct;
  std::copy(r.confusion.begin(), r.confusion.end(), counts.begin() + 2);
  comm.allreduce_sum(counts.data(), counts.size());
  comm.allreduce_sum(&r.loss_sum, 1);
  r.samples = counts[0];
  r.correct = counts[1];
  std::copy(counts.begin() + 2, counts.end(), r.confusion.begin());
}

EvalResult evaluate(nn::Model& model, const ops::KernelTable& kernels, const data::Split& split,
                    dist::Communicator& comm, int batch_size, bool keep_predictions) {
  const int64_t pixels = int64_t(split.rows) * split.cols;
  const EvalShard shard = eval_shard(split.count, comm.rank(), comm.size());
  const int64_t begin = shard.begin, end = shard.end;
  if (batch_size <= 0) batch_size = default_eval_batch(model);
  model.reserve(batch_size);
  AlignedBuffer<float> x(std::size_t(batch_size) * pixels);
  EvalResult r = empty_result(model.num_classes());
  // Eval mode for the pass, the caller's mode after it (also when it throws).
  struct ModeGuard {
    nn::Model& m;
    bool was;
    ~ModeGuard() { m.set_training(was); }
  } guard{model, model.training()};
  model.set_training(false);
  if (keep_predictions) {
    r.predictions.reserve(std::size_t(end - begin));
    r.losses.reserve(std::size_t(end - begin));
  }
  for (int64_t start = begin; start < end; start += batch_size) {
    const int N = int(std::min<int64_t>(batch_size, end - start));
    data::normalize_pixels(x.data(), split.image(start), N * pixels);
    count_logits(r, model.forward(kernels, x.data(), N), split, start, N, keep_predictions);
  }
  sum_counts(r, comm);
  return r;
}

}  // namespace ringtrain::train
