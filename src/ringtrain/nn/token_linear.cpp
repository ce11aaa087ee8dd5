#include "ringtrain/nn/token_linear.h"

#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/tp_reduction.h"

namespace ringtrain::nn {

TokenLinear::TokenLinear(std::string name, int in_features, int out_features, Init weight_init, Init bias_init,
                         TpSplit split)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), weight_init_(weight_init),
      bias_init_(bias_init), split_(split) {}

Shape TokenLinear::configure(const Shape& in) {
  check(!in.empty() && in.back() == in_features_,
        name_ + ": expects [..., " + std::to_string(in_features_) + "], got " + shape_str(in));
  rows_ = shape_numel(in) / in_features_;
  Shape out = in;
  out.back() = out_features_;
  return out;
}

void TokenLinear::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".weight", {out_features_, in_features_}, in_features_, weight_init_),
                    params.declare(name_ + ".bias", {out_features_}, in_features_, bias_init_)};
}

void TokenLinear::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                const Slice& s) {
  if (s.empty()) return;
  if (split_ == TpSplit::Row)
    chunked_linear_forward(k, out, in, p.param(param_indices_[0]), p.param(param_indices_[1]), shape(s.size()).N,
                           in_features_, out_features_, kTpChunks);
  else
    k.linear_forward(out, in, p.param(param_indices_[0]), p.param(param_indices_[1]), shape(s.size()));
}

void TokenLinear::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                 const float* dout, float* din, const Slice& s) {
  float* dweight = grad_slot(p, 0, s);
  float* dbias = grad_slot(p, 1, s);
  if (s.empty()) {
    std::memset(dweight, 0, std::size_t(out_features_) * in_features_ * sizeof(float));
    std::memset(dbias, 0, std::size_t(out_features_) * sizeof(float));
    return;
  }
  const bool chunked = split_ == TpSplit::Column && din;
  k.linear_backward(chunked ? nullptr : din, dweight, dbias, dout, in, p.param(param_indices_[0]), shape(s.size()));
  if (chunked)
    chunked_linear_backward_data(k, din, dout, p.param(param_indices_[0]), shape(s.size()).N, out_features_, in_features_,
                                 kTpChunks, 1);
}

}  // namespace ringtrain::nn
