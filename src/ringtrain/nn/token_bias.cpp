#include "ringtrain/nn/token_bias.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

TokenBias::TokenBias(std::string name, int features, Init init, int fan_in)
    : Layer(std::move(name)), features_(features), fan_in_(fan_in), init_(init) {}

Shape TokenBias::configure(const Shape& in) {
  check(!in.empty() && in.back() == features_,
        name_ + ": expects [..., " + std::to_string(features_) + "], got " + shape_str(in));
  rows_ = shape_numel(in) / features_;
  return in;
}

void TokenBias::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".bias", {features_}, fan_in_, init_)};
}

void TokenBias::forward_slice(const ops::KernelTable&, ParameterSet& p, const float* in, float* out, const Slice& s) {
  const float* b = p.param(param_indices_[0]);
  const int64_t rows = rows_ * s.size();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * features_;
    float* y = out + r * features_;
    for (int f = 0; f < features_; ++f) y[f] = x[f] + b[f];
  }
}

void TokenBias::backward_slice(const ops::KernelTable&, ParameterSet& p, const float*, const float*, const float* dout,
                               float* din, const Slice& s) {
  float* db = grad_slot(p, 0, s);
  std::memset(db, 0, std::size_t(features_) * sizeof(float));
  const int64_t rows = rows_ * s.size();
  for (int64_t r = 0; r < rows; ++r) {
    const float* d = dout + r * features_;
    for (int f = 0; f < features_; ++f) db[f] += d[f];
  }
  if (din) std::memcpy(din, dout, std::size_t(rows) * std::size_t(features_) * sizeof(float));
}

}  // namespace ringtrain::nn
