#include "ringtrain/nn/parallel_attention.h"

#include <cmath>
#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/parallel_token_linear.h"
#include "ringtrain/nn/tp_reduction.h"

namespace ringtrain::nn {

HeadParallelSelfAttention::HeadParallelSelfAttention(std::string name, int dim, int heads, const TensorGroup& group,
                                                     std::vector<int64_t> head_bounds)
    : Layer(std::move(name)), dim_(dim), heads_(heads), rank_(group.rank()) {
  check(dim > 0 && heads > 0 && dim % heads == 0, name_ + ": embedding dim " + std::to_string(dim) +
                                                      " must be a positive multiple of the " + std::to_string(heads) +
                                                      " heads");
  const int T = group.size();
  check(!head_bounds.empty() || heads % T == 0,
        name_ + ": " + std::to_string(heads) + " attention heads cannot be split evenly over " + std::to_string(T) +
            " tensor-parallel ranks (the tensor-parallel degree must divide the heads)");
  head_bounds_ = split_or_even(std::move(head_bounds), heads, T, name_ + " (heads)");
  const int hd = dim / heads;
  for (int64_t b : head_bounds_) feature_bounds_.push_back(b * hd);
}

Shape HeadParallelSelfAttention::configure(const Shape& in) {
  check(in.size() == 2 && in[1] == dim_, name_ + ": expects [T, " + std::to_string(dim_) + "], got " + shape_str(in));
  tokens_ = int(in[0]);
  return in;
}

void HeadParallelSelfAttention::declare(ParameterSet& params) {
  const int D = dim_;
  param_indices_ = {
      params.declare_shard(name_ + ".in_proj_weight", ShardInfo{{3 * D, D}, 0, feature_bounds_, rank_, 3}, D,
                           Init::uniform(std::sqrt(6.0 / (D + 3.0 * D)))),
      params.declare_shard(name_ + ".in_proj_bias", ShardInfo{{3 * D}, 0, feature_bounds_, rank_, 3}, D,
                           Init::constant(0.0)),
      params.declare_shard(name_ + ".out_proj.weight", ShardInfo{{D, D}, 1, feature_bounds_, rank_}, D,
                           Init::fan_in_uniform())};
}

void HeadParallelSelfAttention::reserve(int max_batch) {
  const std::size_t rows = std::size_t(max_batch) * tokens_, Dl = std::size_t(local_dim());
  qkv_.resize(rows * 3 * Dl);
  heads_out_.resize(rows * Dl);
  probs_.resize(std::size_t(max_batch) * local_heads() * tokens_ * tokens_);
  scratch_->reserve(rows, Dl);
}

void HeadParallelSelfAttention::share_backward_scratch(Layer& owner) {
  auto* twin = dynamic_cast<HeadParallelSelfAttention*>(&owner);
  check(twin && twin->dim_ == dim_ && twin->head_bounds_ == head_bounds_ && twin->rank_ == rank_,
        name_ + ": cannot share backward workspaces with '" + owner.name() + "', not the same attention shard");
  scratch_ = twin->scratch_;
}

double HeadParallelSelfAttention::forward_macs() const {
  return double(tokens_) * dim_ * 3 * local_dim() + double(tokens_) * local_dim() * dim_ + core(1).macs();
}

void HeadParallelSelfAttention::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                              const Slice& s) {
  if (s.empty()) return;
  const int Dl = local_dim();
  const std::size_t row0 = std::size_t(s.n0) * tokens_;
  const int rows = s.size() * tokens_;
  float* qkv = qkv_.data() + row0 * 3 * Dl;
  float* heads = heads_out_.data() + row0 * Dl;
  float* probs = probs_.data() + std::size_t(s.n0) * local_heads() * tokens_ * tokens_;
  k.linear_forward(qkv, in, p.param(param_indices_[0]), p.param(param_indices_[1]), {rows, dim_, 3 * Dl});
  k.attention_forward(heads, probs, qkv, core(s.size()));
  // This rank's heads' share of out_proj: a partial sum (g adds the ranks' shares, then the bias).
  // (summed head by head as one process sums the whole: nn/tp_reduction.h)
  chunked_linear_forward(k, out, heads, p.param(param_indices_[2]), nullptr, rows, Dl, dim_, local_heads());
}

void HeadParallelSelfAttention::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in,
                                               const float*, const float* dout, float* din, const Slice& s) {
  const int Dl = local_dim();
  float* g[3];
  for (int i = 0; i < 3; ++i) g[i] = grad_slot(p, i, s);
  if (s.empty()) {
    const std::size_t D = std::size_t(dim_), L = std::size_t(Dl);
    const std::size_t sizes[3] = {3 * L * D, 3 * L, D * L};
    for (int i = 0; i < 3; ++i) std::memset(g[i], 0, sizes[i] * sizeof(float));
    return;
  }
  const std::size_t row0 = std::size_t(s.n0) * tokens_;
  const int rows = s.size() * tokens_;
  const float* qkv = qkv_.data() + row0 * 3 * Dl;
  const float* heads = heads_out_.data() + row0 * Dl;
  const float* probs = probs_.data() + std::size_t(s.n0) * local_heads() * tokens_ * tokens_;
  float* dheads = scratch_->dheads_out.data() + row0 * Dl;
  float* dqkv = scratch_->dqkv.data() + row0 * 3 * Dl;
  k.linear_backward(dheads, g[2], nullptr, dout, heads, p.param(param_indices_[2]), {rows, Dl, dim_});
  k.attention_backward(dqkv, dheads, qkv, probs, core(s.size()));
  // din: the part of dx this rank's heads contribute; f (CopyToTensorGroup) before the layer sums them.
  k.linear_backward(nullptr, g[0], g[1], dqkv, in, p.param(param_indices_[0]), {rows, dim_, 3 * Dl});
  if (din) chunked_linear_backward_data(k, din, dqkv, p.param(param_indices_[0]), rows, 3 * Dl, dim_, local_heads(), 3);
}

}  // namespace ringtrain::nn
