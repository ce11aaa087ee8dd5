// MultiheadSelfAttention: torch.nn.MultiheadAttention(dim, heads, batch_first=True) called as
// self_attention(x, x, x, need_weights=False) (no mask, no dropout: torchvision's ViT) on [T, D] -> [T, D]:
// qkv = x in_proj_weight^T + in_proj_bias (one linear op of N * T rows, PyTorch's packed q | k | v), the
// attention core per head (ops/attention.h), then out_proj. Parameters, in state_dict order:
//   <name>.in_proj_weight [3D, D] (xavier_uniform_), <name>.in_proj_bias [3D] (0),
//   <name>.out_proj.weight [D, D] (nn.Linear's default, fan_in D), <name>.out_proj.bias [D] (0).
// The intermediates (qkv, probabilities, the heads' output) and their gradients live in layer-owned buffers
// sized in reserve() and indexed by sample, so slices of a batch run on threads without sharing them; the
// gradients (AttentionBackwardScratch) are one set for all of a pipeline stage's copies of the layer.
#pragma once
#include <memory>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/ops/attention.h"

namespace ringtrain::nn {

// An attention layer's backward-only workspaces, rows [N, T]: the gradients of the packed q, k, v and of
// the core's output. One set serves every pipeline copy of the layer (Layer::share_backward_scratch).
struct AttentionBackwardScratch {
  AlignedBuffer<float> dqkv, dheads_out;
  // For `rows` token rows of `width` features (the layer's, or its shard's): only grows, as another copy
  // of the layer may have reserved more.
  void reserve(std::size_t rows, std::size_t width) {
    dqkv.grow(rows * 3 * width);
    dheads_out.grow(rows * width);
  }
};

class MultiheadSelfAttention : public Layer {
 public:
  MultiheadSelfAttention(std::string name, int dim, int heads);
  LayerDescription describe() const override { return {.kind = LayerDescription::Kind::SelfAttention, .heads = heads_}; }
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  void reserve(int max_batch) override;
  // The projections (T D 3D + T D D) and the core (2 T T D).
  double forward_macs() const override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void share_backward_scratch(Layer& owner) override;
  const AttentionBackwardScratch* backward_scratch() const { return scratch_.get(); }  // whose (tests)

 private:
  ops::AttentionShape core(int N) const { return {N, tokens_, dim_, heads_}; }
  int dim_, heads_, tokens_ = 0;
  AlignedBuffer<float> qkv_;        // [N, T, 3D]
  AlignedBuffer<float> heads_out_;  // [N, T, D]: the core's output, the out_proj input
  AlignedBuffer<float> probs_;      // [N, H, T, T]
  std::shared_ptr<AttentionBackwardScratch> scratch_ = std::make_shared<AttentionBackwardScratch>();  // 3D, D wide
};

}  // namespace ringtrain::nn
