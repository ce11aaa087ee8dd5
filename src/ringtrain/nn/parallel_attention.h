// HeadParallelSelfAttention: MultiheadSelfAttention (nn/attention.h) split over a tensor group by heads
// (Megatron-LM). Rank r owns heads [h0, h1) of H (head_bounds; even by default) and of D = H x hd
// features the columns [h0 hd, h1 hd) - its "local" D_r = (h1 - h0) hd:
//
//   in_proj_weight [3D, D] column-parallel, a blocked split (nn/shard.h, blocks = 3): the rank's rows of
//     q, of k and of v, so its shard [3 D_r, D] is itself packed q_r | k_r | v_r, as the core expects;
//     in_proj_bias [3D] alike.
//   the core (ops/attention.h) on the rank's heads alone: the heads never mix, and hd = D_r / H_r keeps the
//     1/sqrt(hd) scale.
//   out_proj.weight [D, D] row-parallel: cut by input columns (the rank's heads' features); its output
//     [T, D] is a partial sum, added up by ReduceFromTensorGroup (g) after the layer; out_proj.bias is not
//     here but in a TokenBias named "<name>.out_proj" after g (added once).
//
// So the layer itself never communicates: in the graph it sits between CopyToTensorGroup (f, which
// all-reduces its input gradient - each rank's dx is the part its heads contribute) and g
// (nn/tp_regions.h). Parameters, in state_dict order: <name>.in_proj_weight, <name>.in_proj_bias,
// <name>.out_proj.weight (the shards; whole-tensor names and inits as MultiheadSelfAttention's). Runs on
// thread slices.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/attention.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/parallel_linear.h"
#include "ringtrain/ops/attention.h"

namespace ringtrain::nn {

class HeadParallelSelfAttention : public Layer {
 public:
  // head_bounds: the split of the heads over the group (T+1 bounds of H); empty: an even split, which
  // needs T to divide H (Megatron's rule; an uneven one would leave ranks with different work).
  HeadParallelSelfAttention(std::string name, int dim, int heads, const TensorGroup& group,
                            std::vector<int64_t> head_bounds = {});
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  void reserve(int max_batch) override;
  double forward_macs() const override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void share_backward_scratch(Layer& owner) override;
  int local_heads() const { return int(head_bounds_[std::size_t(rank_) + 1] - head_bounds_[std::size_t(rank_)]); }
  int local_dim() const { return local_heads() * (dim_ / heads_); }

 private:
  ops::AttentionShape core(int N) const { return {N, tokens_, local_dim(), local_heads()}; }
  int dim_, heads_, rank_, tokens_ = 0;
  std::vector<int64_t> head_bounds_, feature_bounds_;  // heads, and the same cut in features (x hd)
  AlignedBuffer<float> qkv_;        // [N, T, 3 D_r]
  AlignedBuffer<float> heads_out_;  // [N, T, D_r]
  AlignedBuffer<float> probs_;      // [N, H_r, T, T]
  std::shared_ptr<AttentionBackwardScratch> scratch_ = std::make_shared<AttentionBackwardScratch>();  // 3 D_r, D_r
};

}  // namespace ringtrain::nn
