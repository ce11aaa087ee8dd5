#include "ringtrain/nn/parallel_token_linear.h"

#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/tp_reduction.h"

namespace ringtrain::nn {

namespace {
// This shard's chunks of the split sum (nn/tp_reduction.h): kTpChunks / T under an even split of a length
// kTpChunks divides; 0 (plain GEMMs, not one process's bits) for any other split.
int local_chunks(const std::vector<int64_t>& bounds, int64_t D, int T) {
  if (kTpChunks % T != 0 || D % kTpChunks != 0) return 0;
  for (int r = 0; r <= T; ++r)
    if (bounds[std::size_t(r)] != D / T * r) return 0;
  return kTpChunks / T;
}
}  // namespace

std::vector<int64_t> split_or_even(std::vector<int64_t> bounds, int64_t D, int T, const std::string& what) {
  if (bounds.empty()) return even_split(D, T, what);
  check_split(bounds, D, T, what);
  return bounds;
}

// ---- ColumnParallelTokenLinear ----------------------------------------------------------------------

ColumnParallelTokenLinear::ColumnParallelTokenLinear(std::string name, int in_features, int out_features,
                                                     const TensorGroup& group, std::vector<int64_t> bounds,
                                                     Init weight_init, Init bias_init)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), rank_(group.rank()),
      weight_init_(weight_init), bias_init_(bias_init) {
  bounds_ = split_or_even(std::move(bounds), out_features, group.size(), name_ + " (column-parallel)");
  chunks_ = local_chunks(bounds_, out_features, group.size());
}

Shape ColumnParallelTokenLinear::configure(const Shape& in) {
  check(!in.empty() && in.back() == in_features_,
        name_ + ": expects [..., " + std::to_string(in_features_) + "], got " + shape_str(in));
  rows_ = shape_numel(in) / in_features_;
  Shape out = in;
  out.back() = local_out();
  return out;
}

void ColumnParallelTokenLinear::declare(ParameterSet& params) {
  param_indices_ = {
      params.declare_shard(name_ + ".weight", ShardInfo{{out_features_, in_features_}, 0, bounds_, rank_}, in_features_,
                           weight_init_),
      params.declare_shard(name_ + ".bias", ShardInfo{{out_features_}, 0, bounds_, rank_}, in_features_, bias_init_)};
}

void ColumnParallelTokenLinear::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                              const Slice& s) {
  if (s.empty()) return;
  k.linear_forward(out, in, p.param(param_indices_[0]), p.param(param_indices_[1]),
                   {int(rows_ * s.size()), in_features_, local_out()});
}

void ColumnParallelTokenLinear::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in,
                                               const float*, const float* dout, float* din, const Slice& s) {
  float* dweight = grad_slot(p, 0, s);
  float* dbias = grad_slot(p, 1, s);
  if (s.empty()) {
    std::memset(dweight, 0, std::size_t(local_out()) * in_features_ * sizeof(float));
    std::memset(dbias, 0, std::size_t(local_out()) * sizeof(float));
    return;
  }
  // din is this shard's part of dx, summed in one process's chunks (nn/tp_reduction.h); f
  // (CopyToTensorGroup) before the layer adds the parts.
  const int rows = int(rows_ * s.size());
  k.linear_backward(chunks_ ? nullptr : din, dweight, dbias, dout, in, p.param(param_indices_[0]),
                    {rows, in_features_, local_out()});
  if (chunks_ && din)
    chunked_linear_backward_data(k, din, dout, p.param(param_indices_[0]), rows, local_out(), in_features_, chunks_, 1);
}

// ---- RowParallelTokenLinear -------------------------------------------------------------------------

RowParallelTokenLinear::RowParallelTokenLinear(std::string name, int in_features, int out_features,
                                               const TensorGroup& group, std::vector<int64_t> bounds, Init weight_init)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), rank_(group.rank()),
      weight_init_(weight_init) {
  bounds_ = split_or_even(std::move(bounds), in_features, group.size(), name_ + " (row-parallel)");
  chunks_ = local_chunks(bounds_, in_features, group.size());
  zero_bias_.resize(std::size_t(out_features));
  std::memset(zero_bias_.data(), 0, std::size_t(out_features) * sizeof(float));
}

Shape RowParallelTokenLinear::configure(const Shape& in) {
  check(!in.empty() && in.back() == local_in(),
        name_ + ": row-parallel shard expects [..., " + std::to_string(local_in()) + "] (of " +
            std::to_string(in_features_) + " features), got " + shape_str(in) +
            "; the layer before must be column-parallel with the same split");
  rows_ = shape_numel(in) / local_in();
  Shape out = in;
  out.back() = out_features_;
  return out;
}

void RowParallelTokenLinear::declare(ParameterSet& params) {
  param_indices_ = {params.declare_shard(name_ + ".weight", ShardInfo{{out_features_, in_features_}, 1, bounds_, rank_},
                                         in_features_, weight_init_)};
}

void RowParallelTokenLinear::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                           const Slice& s) {
  if (s.empty()) return;
  // A partial sum over this shard's input features, in one process's chunks (nn/tp_reduction.h); g
  // (ReduceFromTensorGroup) after the layer adds them up.
  if (chunks_)
    chunked_linear_forward(k, out, in, p.param(param_indices_[0]), nullptr, int(rows_ * s.size()), local_in(),
                           out_features_, chunks_);
  else
    k.linear_forward(out, in, p.param(param_indices_[0]), zero_bias_.data(),
                     {int(rows_ * s.size()), local_in(), out_features_});
}

void RowParallelTokenLinear::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                            const float* dout, float* din, const Slice& s) {
  float* dweight = grad_slot(p, 0, s);
  if (s.empty()) {
    std::memset(dweight, 0, std::size_t(out_features_) * local_in() * sizeof(float));
    return;
  }
  k.linear_backward(din, dweight, nullptr, dout, in, p.param(param_indices_[0]),
                    {int(rows_ * s.size()), local_in(), out_features_});
}

}  // namespace ringtrain::nn
