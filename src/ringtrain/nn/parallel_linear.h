// Tensor-parallel fully connected layers (Megatron-LM's pair; mlx's all-to-sharded / sharded-to-all
// linear). Each of the T ranks of a tensor group holds one shard of the weight and computes its share:
//
//   ColumnParallelLinear  weight [O,I] cut by rows (output features): rank r holds W[o0:o1, :], b[o0:o1].
//     forward:  out_r [N, O_r] = x [N, I] @ W_r^T + b_r         (x is the same on every rank: no traffic)
//     backward: dW_r = dout_r^T @ x, db_r = sum dout_r, dx = all-reduce_sum over the group of dout_r @ W_r
//   RowParallelLinear     weight [O,I] cut by columns (input features): rank r holds W[:, i0:i1]; the bias
//     [O] is whole on every rank (added once, after the sum).
//     forward:  out [N, O] = all-reduce_sum over the group of (x_r [N, I_r] @ W_r^T) + b
//     backward: dW_r = dout^T @ x_r, db = sum dout, dx_r = dout @ W_r   (dout is the same everywhere: no traffic)
//
// Column -> element-wise (ReLU) -> Row therefore costs one all-reduce of [N, O_row] forward and one of
// [N, I_col] backward, and the row layer's input split must be the column layer's output split.
// Everything after the pair (and before it) sees whole tensors, identical on every rank of the group as
// long as the group's all-reduce returns the same bits on every rank (dist/process_grid.h uses our ring,
// which does) - that is what keeps replicated layers identical across the group without extra traffic.
//
// The layers run a whole batch at once (no thread slices: the all-reduce is one collective per batch).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

// The tensor-parallel group as the layers see it: an in-place sum over the group's ranks that leaves
// the same bits on every rank. dist::TensorGroupComm adapts a dist::Communicator to it (nn does not
// depend on dist); LocalTensorGroup is the group of one.
class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
};

class LocalTensorGroup final : public TensorGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
};

// bounds: the split of the sharded dimension over the group (nn/shard.h); empty: even_split.
class ColumnParallelLinear : public Layer {
 public:
  ColumnParallelLinear(std::string name, int in_features, int out_features, TensorGroup& group,
                       std::vector<int64_t> bounds = {});
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  const std::vector<int64_t>& bounds() const { return bounds_; }
  int local_out() const { return int(bounds_[group_.rank() + 1] - bounds_[group_.rank()]); }
  // Floats one sample moves through the group's all-reduce in a training step (dx, backward).
  int64_t allreduce_floats_per_sample() const { return in_features_; }

 private:
  int in_features_, out_features_;
  TensorGroup& group_;
  std::vector<int64_t> bounds_;
};

class RowParallelLinear : public Layer {
 public:
  RowParallelLinear(std::string name, int in_features, int out_features, TensorGroup& group,
                    std::vector<int64_t> bounds = {});
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  const std::vector<int64_t>& bounds() const { return bounds_; }
  int local_in() const { return int(bounds_[group_.rank() + 1] - bounds_[group_.rank()]); }
  // Floats one sample moves through the group's all-reduce in a training step (the output, forward).
  int64_t allreduce_floats_per_sample() const { return out_features_; }

 private:
  int in_features_, out_features_;
  TensorGroup& group_;
  std::vector<int64_t> bounds_;
  AlignedBuffer<float> zero_bias_;  // the partial products are summed before the bias is added
};

}  // namespace ringtrain::nn
