#include "ringtrain/nn/parallel_linear.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

namespace {
std::vector<int64_t> split_or_even(std::vector<int64_t> bounds, int64_t D, int T, const std::string& what) {
  if (bounds.empty()) return even_split(D, T, what);
  check_split(bounds, D, T, what);
  return bounds;
}
}  // namespace

// ---- ColumnParallelLinear -------------------------------------------------------------------------

ColumnParallelLinear::ColumnParallelLinear(std::string name, int in_features, int out_features, TensorGroup& group,
                                           std::vector<int64_t> bounds)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), group_(group) {
  bounds_ = split_or_even(std::move(bounds), out_features, group.size(), name_ + " (column-parallel)");
}

void ColumnParallelLinear::declare(ParameterSet& params) {
  const int r = group_.rank();
  param_indices_ = {
      params.declare_shard(name_ + ".weight", ShardInfo{{out_features_, in_features_}, 0, bounds_, r}, in_features_),
      params.declare_shard(name_ + ".bias", ShardInfo{{out_features_}, 0, bounds_, r}, in_features_)};
}

Shape ColumnParallelLinear::configure(const Shape& in) {
  check(shape_numel(in) == in_features_, name_ + ": expects " + std::to_string(in_features_) +
                                             " input features, got " + shape_str(in));
  return {local_out()};
}

void ColumnParallelLinear::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  k.linear_forward(out, in, p.param(param_indices_[0]), p.param(param_indices_[1]), {N, in_features_, local_out()});
}

void ColumnParallelLinear::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                    const float* dout, float* din, int N) {
  k.linear_backward(din, p.grad(param_indices_[0]), p.grad(param_indices_[1]), dout, in, p.param(param_indices_[0]),
                    {N, in_features_, local_out()});
  // Each rank's din is the part of dx its output features contribute; dx is their sum.
  if (din) group_.allreduce_sum(din, std::size_t(N) * std::size_t(in_features_));
}

// ---- RowParallelLinear ----------------------------------------------------------------------------

RowParallelLinear::RowParallelLinear(std::string name, int in_features, int out_features, TensorGroup& group,
                                     std::vector<int64_t> bounds)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), group_(group) {
  bounds_ = split_or_even(std::move(bounds), in_features, group.size(), name_ + " (row-parallel)");
  zero_bias_.resize(std::size_t(out_features));
  for (int o = 0; o < out_features; ++o) zero_bias_.data()[o] = 0.0f;
}

void RowParallelLinear::declare(ParameterSet& params) {
  const int r = group_.rank();
  param_indices_ = {
      params.declare_shard(name_ + ".weight", ShardInfo{{out_features_, in_features_}, 1, bounds_, r}, in_features_),
      params.declare(name_ + ".bias", {out_features_}, in_features_)};  // whole on every rank
}

Shape RowParallelLinear::configure(const Shape& in) {
  check(shape_numel(in) == local_in(),
        name_ + ": row-parallel shard expects " + std::to_string(local_in()) + " input features (of " +
            std::to_string(in_features_) + "), got " + shape_str(in) +
            "; the layer before must be column-parallel with the same split");
  return {out_features_};
}

void RowParallelLinear::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  k.linear_forward(out, in, p.param(param_indices_[0]), zero_bias_.data(), {N, local_in(), out_features_});
  group_.allreduce_sum(out, std::size_t(N) * std::size_t(out_features_));
  const float* b = p.param(param_indices_[1]);
  for (int n = 0; n < N; ++n) {
    float* row = out + std::size_t(n) * std::size_t(out_features_);
    for (int o = 0; o < out_features_; ++o) row[o] += b[o];
  }
}

void RowParallelLinear::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                 const float* dout, float* din, int N) {
  k.linear_backward(din, p.grad(param_indices_[0]), p.grad(param_indices_[1]), dout, in, p.param(param_indices_[0]),
                    {N, local_in(), out_features_});
}

}  // namespace ringtrain::nn
