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

void Linear::reserve(int max_batch) {
  partials_.reserve(threads(), {std::size_t(out_features_) * in_features_, std::size_t(out_features_)});
}

void Linear::forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi > lo)
      k.linear_forward(out + std::size_t(lo) * out_features_, in + std::size_t(lo) * in_features_,
                       p.param(param_indices_[0]), p.param(param_indices_[1]), {hi - lo, in_features_, out_features_});
  });
}

void Linear::backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                      const float* dout, float* din, int N) {
  float* dweight = p.grad(param_indices_[0]);
  float* dbias = p.grad(param_indices_[1]);
  parallel_run(pool_, [&](int t) {
    auto [lo, hi] = slice_of(N, threads(), t, 16);
    if (hi == lo) {
      partials_.zero_slot(t, 0, dweight);
      partials_.zero_slot(t, 1, dbias);
      return;
    }
    k.linear_backward(din ? din + std::size_t(lo) * in_features_ : nullptr, partials_.slot(t, 0, dweight),
                      partials_.slot(t, 1, dbias), dout + std::size_t(lo) * out_features_,
                      in + std::size_t(lo) * in_features_, p.param(param_indices_[0]),
                      {hi - lo, in_features_, out_features_});
  });
  partials_.reduce(pool_, {dweight, dbias});
}

}  // namespace ringtrain::nn
