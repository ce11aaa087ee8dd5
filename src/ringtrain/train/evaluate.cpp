#include "ringtrain/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "ringtrain/core/aligned.h"
#include "ringtrain/data/loader.h"

namespace ringtrain::train {

EvalResult evaluate(nn::Model& model, const ops::KernelTable& kernels, const data::Split& split,
                    dist::Communicator& comm, int batch_size, bool keep_predictions) {
  const int64_t pixels = int64_t(split.rows) * split.cols;
  // Contiguous shard of this rank: [begin, end). No padding, no duplicates.
  const int64_t begin = split.count * comm.rank() / comm.size();
  const int64_t end = split.count * (comm.rank() + 1) / comm.size();
  model.reserve(batch_size);
  AlignedBuffer<float> x(std::size_t(batch_size) * pixels);
  const int K = model.num_classes();

  EvalResult r;
  if (keep_predictions) {
    r.predictions.reserve(std::size_t(end - begin));
    r.losses.reserve(std::size_t(end - begin));
  }
  for (int64_t start = begin; start < end; start += batch_size) {
    const int N = int(std::min<int64_t>(batch_size, end - start));
    data::normalize_pixels(x.data(), split.image(start), N * pixels);
    const float* logits = model.forward(kernels, x.data(), N);
    for (int n = 0; n < N; ++n) {
      const float* row = logits + int64_t(n) * K;
      const int label = split.labels[start + n];
      int best = int(std::max_element(row, row + K) - row);
      float maxv = row[best];
      double sum = 0.0;
      for (int k = 0; k < K; ++k) sum += std::exp(double(row[k] - maxv));
      const double loss = -(double(row[label] - maxv) - std::log(sum));
      r.loss_sum += loss;
      r.correct += best == label;
      r.confusion[label][best] += 1;
      if (keep_predictions) {
        r.predictions.push_back(uint8_t(best));
        r.losses.push_back(float(loss));
      }
    }
    r.samples += N;
  }

  // Sum counts over ranks: samples, correct, loss and the confusion matrix in one call each.
  int64_t counts[2 + kClasses * kClasses];
  counts[0] = r.samples;
  counts[1] = r.correct;
  for (int t = 0; t < kClasses; ++t)
    for (int p = 0; p < kClasses; ++p) counts[2 + t * kClasses + p] = r.confusion[t][p];
  comm.allreduce_sum(counts, 2 + kClasses * kClasses);
  comm.allreduce_sum(&r.loss_sum, 1);
  r.samples = counts[0];
  r.correct = counts[1];
  for (int t = 0; t < kClasses; ++t)
    for (int p = 0; p < kClasses; ++p) r.confusion[t][p] = counts[2 + t * kClasses + p];
  return r;
}

}  // namespace ringtrain::train
