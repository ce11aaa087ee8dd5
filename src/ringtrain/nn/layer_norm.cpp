#include "ringtrain/nn/layer_norm.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

LayerNorm::LayerNorm(std::string name, int dim, double eps) : Layer(std::move(name)), dim_(dim), eps_(eps) {
  check(dim > 0, name_ + ": dim must be positive");
}

Shape LayerNorm::configure(const Shape& in) {
  check(!in.empty() && in.back() == dim_,
        name_ + ": expects [..., " + std::to_string(dim_) + "], got " + shape_str(in));
  rows_ = shape_numel(in) / dim_;
  return in;
}

void LayerNorm::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".weight", {dim_}, dim_, Init::constant(1.0)),
                    params.declare(name_ + ".bias", {dim_}, dim_, Init::constant(0.0))};
}

void LayerNorm::reserve(int max_batch) {
  mean_.resize(std::size_t(max_batch) * rows_);
  rstd_.resize(std::size_t(max_batch) * rows_);
}

void LayerNorm::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.layer_norm_forward(out, mean_.data() + s.n0 * rows_, rstd_.data() + s.n0 * rows_, in, p.param(param_indices_[0]),
                       p.param(param_indices_[1]), {s.size() * rows_, dim_}, eps_);
}

void LayerNorm::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                               const float* dout, float* din, const Slice& s) {
  float* dweight = grad_slot(p, 0, s);
  float* dbias = grad_slot(p, 1, s);
  if (s.empty()) {
    std::memset(dweight, 0, std::size_t(dim_) * sizeof(float));
    std::memset(dbias, 0, std::size_t(dim_) * sizeof(float));
    return;
  }
  k.layer_norm_backward(din, dweight, dbias, dout, in, p.param(param_indices_[0]), mean_.data() + s.n0 * rows_,
                        rstd_.data() + s.n0 * rows_, {s.size() * rows_, dim_, s.accumulate_din});
}

}  // namespace ringtrain::nn
