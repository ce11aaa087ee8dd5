#include "ringtrain/data/distributed_sampler.h"

#include <numeric>
#include <string>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       const DistributedSamplerOptions& opt)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), opt_(opt) {
  check(num_replicas >= 1, "sampler: world size must be at least 1, got " + std::to_string(num_replicas));
  check(rank >= 0 && rank < num_replicas, "sampler: rank " + std::to_string(rank) + " is outside [0, " +
                                              std::to_string(num_replicas) + ")");
  check(dataset_size >= 0, "sampler: negative dataset size");
  const int64_t N = dataset_size, W = num_replicas;
  // PyTorch: drop_last and N % W != 0 -> ceil((N - W) / W) (= floor(N/W)); else ceil(N / W).
  num_samples_ = opt_.drop_last ? N / W : (N + W - 1) / W;
}

std::vector<int64_t> DistributedSampler::global_indices() const {
  const int64_t N = dataset_size_, total = total_size();
  std::vector<int64_t> idx;
  if (opt_.shuffle) {
    Rng rng(opt_.seed + uint64_t(epoch_), opt_.stream);
    idx = random_permutation(N, rng);
  } else {
    idx.resize(N);
    std::iota(idx.begin(), idx.end(), int64_t(0));
  }
  if (total <= N) {
    idx.resize(total);  // drop_last (or nothing to pad)
  } else if (N > 0) {
    // Pad by repeating from the start; PyTorch repeats the whole list when padding exceeds N.
    idx.reserve(total);
    for (int64_t i = 0; int64_t(idx.size()) < total; ++i) idx.push_back(idx[i % N]);
  }
  return idx;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all = global_indices(), mine;
  mine.reserve(num_samples_);
  for (int64_t p = rank_; p < int64_t(all.size()); p += num_replicas_) mine.push_back(all[p]);
  return mine;
}

std::vector<int64_t> eval_shard(int64_t dataset_size, int num_replicas, int rank) {
  check(num_replicas >= 1 && rank >= 0 && rank < num_replicas,
        "eval shard: rank " + std::to_string(rank) + " of " + std::to_string(num_replicas) + " is not valid");
  std::vector<int64_t> mine;
  mine.reserve(dataset_size / num_replicas + 1);
  for (int64_t i = rank; i < dataset_size; i += num_replicas) mine.push_back(i);
  return mine;
}

}  // namespace ringtrain::data
