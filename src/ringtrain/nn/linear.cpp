#include "ringtrain/nn/linear.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Linear::Linear(std::string name, int in_features, int out_features)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features) {}

void Linear::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".weight", {out_features_, in_features_}, in_features_),
                    params.declare(name_ + ".bias", {out_features_}, in_features_)};
}

Shape Linear::configure(const Shape& in) {
  check(shape_numel(in) == in_features_, name_ + ": expects " + std::to_string(in_features_) +
                                             " input features, got " + shape_str(in));
  return {out_features_};
}

void Linear::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  k.linear_forward(out, in, p.param(param_indices_[0]), p.param(param_indices_[1]),
                   {N, in_features_, out_features_});
}

void Linear::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                      const float* dout, float* din, int N) {
  k.linear_backward(din, p.grad(param_indices_[0]), p.grad(param_indices_[1]), dout, in,
                    p.param(param_indices_[0]), {N, in_features_, out_features_});
}

}  // namespace ringtrain::nn
