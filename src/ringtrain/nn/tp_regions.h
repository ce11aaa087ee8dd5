// Megatron-LM's conjugate pair around a tensor-parallel region, as layers of their own so the graph
// shows where the tensor group communicates (Shoeybi et al. 2019, section 3: "f" and "g"):
//
//   CopyToTensorGroup      (f)  forward: identity (every rank of the group already holds the same x)
//                               backward: dx = all-reduce_sum of the ranks' dx (each rank's shard of the
//                               region contributes a part of the gradient of x)
//   ReduceFromTensorGroup  (g)  forward: y = all-reduce_sum of the ranks' partial outputs
//                               backward: identity (dy is the same on every rank)
//
// A region is f -> column-parallel layer(s) -> ... -> row-parallel layer -> g: the transformer's attention
// (f, HeadParallelSelfAttention, g; nn/parallel_attention.h) and MLP (f, ColumnParallelTokenLinear, GELU,
// RowParallelTokenLinear, g; nn/parallel_token_linear.h). The layers between f and g never communicate,
// so a region costs one all-reduce forward (g) and one backward (f), each of the region's input size.
// Both sums run on the group's recursive doubling (ring for a T not a power of two), which leaves the same
// bits on every rank, and one process's bits for vit (nn/tp_reduction.h): the layers after g (and
// before f) see identical tensors across the group and their replicated parameters stay identical.
//
// They run whole batches (one collective a batch) and are therefore meeting points for threads
// (needs_whole_batch), like batch norm.
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/parallel_linear.h"

namespace ringtrain::nn {

class CopyToTensorGroup : public Layer {
 public:
  CopyToTensorGroup(std::string name, TensorGroup& group) : Layer(std::move(name)), group_(group) {}
  Shape configure(const Shape& in) override;
  bool needs_whole_batch() const override { return true; }
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  // Floats one sample moves through the group's all-reduce in a training step (backward only).
  int64_t allreduce_floats_per_sample() const { return features_; }

 private:
  TensorGroup& group_;
  int64_t features_ = 0;  // per sample
};

class ReduceFromTensorGroup : public Layer {
 public:
  ReduceFromTensorGroup(std::string name, TensorGroup& group) : Layer(std::move(name)), group_(group) {}
  Shape configure(const Shape& in) override;
  bool needs_whole_batch() const override { return true; }
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  // Floats one sample moves through the group's all-reduce in a training step (forward only).
  int64_t allreduce_floats_per_sample() const { return features_; }

 private:
  TensorGroup& group_;
  int64_t features_ = 0;
};

// Floats one sample moves through a model's tensor-group all-reduces in a training step (forward and
// backward): the f/g layers' and the LeNet-5 parallel linears' (whose all-reduce sits inside them).
int64_t tensor_parallel_floats_per_sample(const class Model& model);

}  // namespace ringtrain::nn
