// Shards of a tensor split along one dimension across the ranks of a tensor-parallel group (the
// parameters of ColumnParallelLinear / RowParallelLinear, nn/parallel_linear.h). A ParamView of a sharded
// parameter holds the shard's shape and keeps the PyTorch name of the whole tensor ("fc1.weight"); its
// ShardInfo says how the whole tensor (`full`) is cut, so checkpoints, initialisation and reports can
// gather the shards back or cut a whole tensor into them.
//
// A split of D elements into T shards is T+1 increasing bounds, bounds[0] = 0, bounds[T] = D; shard r is
// [bounds[r], bounds[r+1]). even_split() gives sizes that differ by at most one (the first D % T shards
// one larger), as torch.tensor_split does.
//
// A blocked split (blocks = B > 1) cuts a dimension of B x D elements that holds B blocks of D side by
// side - attention's packed in_proj_weight [3D, D] is q | k | v - by the same bounds in every block:
// shard r is rows [b*D + bounds[r], b*D + bounds[r+1]) of each block b, in block order, so the shard is
// itself packed (its q | k | v rows of the rank's heads). bounds then split D, not B x D.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/core/tensor.h"

namespace ringtrain::nn {

struct ShardInfo {
  Shape full;                   // PyTorch shape of the whole tensor (also when not sharded)
  int dim = -1;                 // dimension cut (-1: not sharded, the same tensor on every rank)
  std::vector<int64_t> bounds;  // T+1 bounds along dim (within one block when blocks > 1)
  int index = 0;                // this rank's shard
  int blocks = 1;               // dim holds this many blocks, each cut by bounds (see above)

  bool sharded() const { return dim >= 0; }
  int count() const { return sharded() ? int(bounds.size()) - 1 : 1; }
  int64_t begin(int r) const { return bounds[r]; }
  int64_t end(int r) const { return bounds[r + 1]; }
  // Shape of shard r.
  Shape shard_shape(int r) const;
};

// Bounds for D elements over T shards, sizes differing by at most one. Throws Error naming `what` when
// a shard would be empty (T > D) or T < 1.
std::vector<int64_t> even_split(int64_t D, int T, const std::string& what);
// Checks bounds as a split of D into T non-empty shards; throws Error naming `what` otherwise.
void check_split(const std::vector<int64_t>& bounds, int64_t D, int T, const std::string& what);

// Copies shard r of the whole tensor `full` (row-major, info.full's shape) to `shard` (row-major, shard
// shape), or back. For an unsharded tensor both copy the whole tensor.
void extract_shard(const ShardInfo& info, int r, const float* full, float* shard);
void insert_shard(const ShardInfo& info, int r, const float* shard, float* full);

}  // namespace ringtrain::nn
