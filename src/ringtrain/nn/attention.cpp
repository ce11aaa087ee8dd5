#include "ringtrain/nn/attention.h"

#include <cmath>
#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/tp_reduction.h"

namespace ringtrain::nn {

MultiheadSelfAttention::MultiheadSelfAttention(std::string name, int dim, int heads)
    : Layer(std::move(name)), dim_(dim), heads_(heads) {
  check(dim > 0 && heads > 0 && dim % heads == 0, name_ + ": embedding dim " + std::to_string(dim) +
                                                      " must be a positive multiple of the " + std::to_string(heads) +
                                                      " heads");
}

Shape MultiheadSelfAttention::configure(const Shape& in) {
  check(in.size() == 2 && in[1] == dim_, name_ + ": expects [T, " + std::to_string(dim_) + "], got " + shape_str(in));
  tokens_ = int(in[0]);
  return in;
}

void MultiheadSelfAttention::declare(ParameterSet& params) {
  const int D = dim_;
  param_indices_ = {
      params.declare(name_ + ".in_proj_weight", {3 * D, D}, D, Init::uniform(std::sqrt(6.0 / (D + 3.0 * D)))),
      params.declare(name_ + ".in_proj_bias", {3 * D}, D, Init::constant(0.0)),
      params.declare(name_ + ".out_proj.weight", {D, D}, D, Init::fan_in_uniform()),
      params.declare(name_ + ".out_proj.bias", {D}, D, Init::constant(0.0))};
}

void MultiheadSelfAttention::reserve(int max_batch) {
  const std::size_t rows = std::size_t(max_batch) * tokens_;
  qkv_.resize(rows * 3 * dim_);
  heads_out_.resize(rows * dim_);
  probs_.resize(std::size_t(max_batch) * heads_ * tokens_ * tokens_);
  scratch_->reserve(rows, std::size_t(dim_));
}

void MultiheadSelfAttention::share_backward_scratch(Layer& owner) {
  auto* twin = dynamic_cast<MultiheadSelfAttention*>(&owner);
  check(twin && twin->dim_ == dim_ && twin->heads_ == heads_,
        name_ + ": cannot share backward workspaces with '" + owner.name() + "', not the same attention");
  scratch_ = twin->scratch_;
}

double MultiheadSelfAttention::forward_macs() const {
  return double(tokens_) * dim_ * 3 * dim_ + double(tokens_) * dim_ * dim_ + core(1).macs();
}

void MultiheadSelfAttention::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                           const Slice& s) {
  if (s.empty()) return;
  const std::size_t row0 = std::size_t(s.n0) * tokens_;
  const int rows = s.size() * tokens_;
  float* qkv = qkv_.data() + row0 * 3 * dim_;
  float* heads = heads_out_.data() + row0 * dim_;
  float* probs = probs_.data() + std::size_t(s.n0) * heads_ * tokens_ * tokens_;
  k.linear_forward(qkv, in, p.param(param_indices_[0]), p.param(param_indices_[1]), {rows, dim_, 3 * dim_});
  k.attention_forward(heads, probs, qkv, core(s.size()));
  // out_proj sums over the heads' features head by head, as --tp splits it (nn/tp_reduction.h).
  chunked_linear_forward(k, out, heads, p.param(param_indices_[2]), p.param(param_indices_[3]), rows, dim_, dim_, heads_);
}

void MultiheadSelfAttention::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                            const float* dout, float* din, const Slice& s) {
  float* g[4];
  for (int i = 0; i < 4; ++i) g[i] = grad_slot(p, i, s);
  if (s.empty()) {
    const std::size_t D = std::size_t(dim_);
    const std::size_t sizes[4] = {3 * D * D, 3 * D, D * D, D};
    for (int i = 0; i < 4; ++i) std::memset(g[i], 0, sizes[i] * sizeof(float));
    return;
  }
  const std::size_t row0 = std::size_t(s.n0) * tokens_;
  const int rows = s.size() * tokens_;
  const float* qkv = qkv_.data() + row0 * 3 * dim_;
  const float* heads = heads_out_.data() + row0 * dim_;
  const float* probs = probs_.data() + std::size_t(s.n0) * heads_ * tokens_ * tokens_;
  float* dheads = scratch_->dheads_out.data() + row0 * dim_;
  float* dqkv = scratch_->dqkv.data() + row0 * 3 * dim_;
  k.linear_backward(dheads, g[2], g[3], dout, heads, p.param(param_indices_[2]), {rows, dim_, dim_});
  k.attention_backward(dqkv, dheads, qkv, probs, core(s.size()));
  k.linear_backward(nullptr, g[0], g[1], dqkv, in, p.param(param_indices_[0]), {rows, dim_, 3 * dim_});
  // din sums over the packed q, k, v features head by head, as --tp splits it (nn/tp_reduction.h).
  if (din) chunked_linear_backward_data(k, din, dqkv, p.param(param_indices_[0]), rows, 3 * dim_, dim_, heads_, 3);
}

}  // namespace ringtrain::nn
