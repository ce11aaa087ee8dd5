#include "ringtrain/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain::optim {

std::vector<StateBuffer> Optimizer::state() {
  std::vector<StateBuffer> s = own_state();
  if (has_ema()) s.push_back({"ema", ema_.data(), n_});
  return s;
}

void Optimizer::enable_ema(float decay, const float* params) {
  check(decay > 0.0f && decay < 1.0f, "--ema must be in (0, 1) (0 turns it off), got " + std::to_string(decay));
  ema_decay_ = decay;
  ema_.resize(n_);
  std::copy(params, params + n_, ema_.data());
}

void Optimizer::update_ema(const float* params) {
  if (!has_ema()) return;
  const double t = double(steps_);
  const float d = float(std::min(double(ema_decay_), (1.0 + t) / (10.0 + t)));
  const float w = 1.0f - d;
  float* e = ema_.data();
  for (std::size_t i = 0; i < n_; ++i) e[i] += w * (params[i] - e[i]);
}

Adam::Adam(std::size_t n, const AdamOptions& opt) : Optimizer(n, opt.lr), opt_(opt) {
  exp_avg_.resize(n);
  exp_avg_sq_.resize(n);
}

void Adam::step(float* params, const float* grads) {
  ++steps_;
  // As torch 1.13's single-tensor Adam: bias corrections in double, then float arithmetic per element.
  const double bias_correction1 = 1.0 - std::pow(double(opt_.beta1), double(steps_));
  const double bias_correction2 = 1.0 - std::pow(double(opt_.beta2), double(steps_));
  const ops::AdamStep a{opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay,
                        float(double(lr_) / bias_correction1), float(std::sqrt(bias_correction2))};
  adam_step_(params, grads, exp_avg_.data(), exp_avg_sq_.data(), n_, a);
}

std::vector<StateBuffer> Adam::own_state() {
  return {{"exp_avg", exp_avg_.data(), n_}, {"exp_avg_sq", exp_avg_sq_.data(), n_}};
}

Sgd::Sgd(std::size_t n, const SgdOptions& opt) : Optimizer(n, opt.lr), opt_(opt) { momentum_.resize(n); }

void Sgd::step(float* params, const float* grads) {
  float* buf = momentum_.data();
  const bool first = steps_ == 0;
  ++steps_;
  for (std::size_t i = 0; i < n_; ++i) {
    float g = grads[i];
    if (opt_.weight_decay != 0.0f) g += opt_.weight_decay * params[i];
    if (opt_.momentum != 0.0f) {
      buf[i] = first ? g : buf[i] * opt_.momentum + g;
      g = opt_.nesterov ? g + opt_.momentum * buf[i] : buf[i];
    }
    params[i] -= lr_ * g;
  }
}

std::vector<StateBuffer> Sgd::own_state() { return {{"momentum_buffer", momentum_.data(), n_}}; }

}  // namespace ringtrain::optim
