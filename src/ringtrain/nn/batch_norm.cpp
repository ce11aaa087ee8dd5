#include "ringtrain/nn/batch_norm.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

BatchNorm2d::BatchNorm2d(std::string name, int channels, double eps, double momentum, ops::BnActivation activation)
    : Layer(std::move(name)), channels_(channels), eps_(eps), momentum_(momentum), activation_(activation) {
  check(channels > 0, name_ + ": channel count must be positive");
}

LayerDescription BatchNorm2d::describe() const {
  using Kind = LayerDescription::Kind;
  const Kind act = activation_ == ops::BnActivation::Relu    ? Kind::ReLU
                   : activation_ == ops::BnActivation::Relu6 ? Kind::ReLU6
                                                             : Kind::Unsupported;
  return {.kind = Kind::BatchNorm2d, .eps = eps_, .buffers = {running_mean_, running_var_}, .fused_activation = act};
}

Shape BatchNorm2d::configure(const Shape& in) {
  check(in.size() == 3 && in[0] == channels_,
        name_ + ": expects [" + std::to_string(channels_) + ",H,W], got " + shape_str(in));
  hw_ = int(in[1] * in[2]);
  return in;
}

void BatchNorm2d::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_ + ".weight", {channels_}, channels_, Init::constant(1.0)),
                    params.declare(name_ + ".bias", {channels_}, channels_, Init::constant(0.0))};
  running_mean_ = params.declare_buffer(name_ + ".running_mean", {channels_}, 0.0);
  running_var_ = params.declare_buffer(name_ + ".running_var", {channels_}, 1.0);
  tracked_ = params.declare_counter(name_ + ".num_batches_tracked");
}

void BatchNorm2d::reserve(int) {
  save_mean_.resize(std::size_t(channels_));
  save_invstd_.resize(std::size_t(channels_));
}

void BatchNorm2d::require_whole(const Slice& s) const {
  if (s.n0 != 0 || s.n1 != s.N)
    throw Error(name_ + ": batch norm in training mode needs the whole batch, not a slice");
}

void BatchNorm2d::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                const Slice& s) {
  const float* gamma = p.param(param_indices_[0]);
  const float* beta = p.param(param_indices_[1]);
  if (!training()) {
    if (s.empty()) return;
    k.batch_norm_forward_eval(out, in, gamma, beta, p.buffer(running_mean_), p.buffer(running_var_), shape(s.size()),
                              eps_);
    return;
  }
  require_whole(s);
  if (int64_t(s.size()) * hw_ <= 1)  // torch refuses too: the unbiased variance of one value is undefined
    throw Error(name_ + ": batch norm in training mode needs more than one value per channel");
  float* running_mean = p.buffer(running_mean_);
  float* running_var = p.buffer(running_var_);
  by_channels(s.size(), [&](const ops::BatchNormShape& sh) {
    k.batch_norm_forward_train(out, save_mean_.data(), save_invstd_.data(), running_mean, running_var, in, gamma, beta,
                               sh, eps_, momentum_);
  });
  ++*p.counter(tracked_);
}

void BatchNorm2d::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                                 const float* dout, float* din, const Slice& s) {
  float* dgamma = grad_slot(p, 0, s);
  float* dbeta = grad_slot(p, 1, s);
  const float* gamma = p.param(param_indices_[0]);
  if (s.empty()) {
    std::memset(dgamma, 0, std::size_t(channels_) * sizeof(float));
    std::memset(dbeta, 0, std::size_t(channels_) * sizeof(float));
    return;
  }
  if (!training()) {
    k.batch_norm_backward_eval(din, dgamma, dbeta, dout, out, in, gamma, p.buffer(running_mean_),
                               p.buffer(running_var_), shape(s.size()), eps_);
    return;
  }
  require_whole(s);
  by_channels(s.size(), [&](const ops::BatchNormShape& sh) {
    k.batch_norm_backward_train(din, dgamma, dbeta, dout, out, in, gamma, save_mean_.data(), save_invstd_.data(), sh);
  });
}

}  // namespace ringtrain::nn
