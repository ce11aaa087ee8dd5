// DistributedSampler: which dataset indices each rank trains on, with the semantics of PyTorch's
// torch.utils.data.distributed.DistributedSampler (only the permutation's source differs: ours is
// ringtrain::random_permutation from Rng(seed + epoch), the same on every rank):
//   - shuffle: a permutation of 0..N-1 from seed + epoch (else 0..N-1 in order);
//   - !drop_last: num_samples = ceil(N/W), the list is padded to total_size = num_samples*W by repeating
//     it from its start (as often as needed when N < padding);
//   - drop_last: num_samples = floor(N/W), the list is cut to total_size;
//   - rank r takes positions r, r+W, r+2W, ... < total_size.
// Every rank gets num_samples indices, so every rank runs the same number of steps.
// Evaluation must count each sample once: eval_shard() gives rank r the indices r, r+W, ... < N, unpadded
// (shards then differ in length by at most one; combine counts with an all-reduce).
#pragma once
#include <cstdint>
#include <vector>

namespace ringtrain::data {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
  // The Rng stream the permutations are drawn from (a detail of our generator, not of the semantics):
  // lets a caller keep the order it used before it became distributed.
  uint64_t stream = 0x853c49e6748fea9bULL;
};

class DistributedSampler {
 public:
  // Throws Error for W < 1, rank outside [0, W) or N < 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, const DistributedSamplerOptions& opt = {});

  // The permutation of each epoch is drawn from seed + epoch.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t num_samples() const { return num_samples_; }  // this rank's count, every epoch
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  int64_t dataset_size() const { return dataset_size_; }

  // This rank's indices for the current epoch (num_samples of them).
  std::vector<int64_t> indices() const;
  // The padded (or cut) global list of total_size indices the ranks take turns from.
  std::vector<int64_t> global_indices() const;

 private:
  int64_t dataset_size_;
  int num_replicas_, rank_;
  DistributedSamplerOptions opt_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

// Evaluation sharding without padding: rank r gets r, r+W, r+2W, ... < N (each sample exactly once).
std::vector<int64_t> eval_shard(int64_t dataset_size, int num_replicas, int rank);

}  // namespace ringtrain::data
