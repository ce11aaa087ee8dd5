#include "ringtrain/optim/optimizer.h"

#include <cmath>

namespace ringtrain::optim {

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

std::vector<StateBuffer> Adam::state() {
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

std::vector<StateBuffer> Sgd::state() { return {{"momentum_buffer", momentum_.data(), n_}}; }

}  // namespace ringtrain::optim
