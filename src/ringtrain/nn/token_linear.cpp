#include "ringtrain/nn/token_linear.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

TokenLinear::TokenLinear(std::string name, int in_features, int out_features, Init weight_init, Init bias_init)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), weight_init_(weight_init),
      bias_init_(bias_init) {}

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
  k.linear_backward(din, dweight, dbias, dout, in, p.param(param_indices_[0]), shape(s.size()));
}

}  // namespace ringtrain::nn
