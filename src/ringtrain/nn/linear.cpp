#include "ringtrain/nn/linear.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Linear::Linear(std::string name, int in_features, int out_features, Init weight_init, Init bias_init)
    : Layer(std::move(name)), in_features_(in_features), out_features_(out_features), weight_init_(weight_init),
      bias_init_(bias_init) {}

void Linear::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".weight", {out_features_, in_features_}, in_features_, weight_init_),
                    params.declare(name_ + ".bias", {out_features_}, in_features_, bias_init_)};
}

Shape Linear::configure(const Shape& in) {
  check(shape_numel(in) == in_features_, name_ + ": expects " + std::to_string(in_features_) +
                                             " input features, got " + shape_str(in));
  return {out_features_};
}

void Linear::reserve(int max_batch) {
  partials_.reserve(threads(), {std::size_t(out_features_) * in_features_, std::size_t(out_features_)});
}

void Linear::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.linear_forward(out, in,
                   p.param(param_indices_[0]), p.param(param_indices_[1]), {s.size(), in_features_, out_features_});
}

void Linear::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                            const float* dout, float* din, const Slice& s) {
  float* dweight = partials_.slot(s.t, 0, p.grad(param_indices_[0]));
  float* dbias = partials_.slot(s.t, 1, p.grad(param_indices_[1]));
  if (s.empty()) {
    partials_.zero_slot(s.t, 0, dweight);
    partials_.zero_slot(s.t, 1, dbias);
    return;
  }
  k.linear_backward(din, dweight, dbias,
                    dout, in,
                    p.param(param_indices_[0]), {s.size(), in_features_, out_features_});
}

void Linear::reduce_grads(ParameterSet& p, int part, int parts) {
  partials_.reduce({p.grad(param_indices_[0]), p.grad(param_indices_[1])}, part, parts);
}

}  // namespace ringtrain::nn
