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

void Optimizer::set_spans(std::vector<Span> spans) {
  std::size_t total = 0;
  for (const Span& s : spans) total += s.count;
  check(total == n_, "optimizer: spans hold " + std::to_string(total) + " floats, the state " + std::to_string(n_));
  check(steps_ == 0 && !has_ema(), "optimizer: spans must be set before the first step");
  spans_ = std::move(spans);
}

void Optimizer::enable_ema(float decay, const float* params) {
  check(decay > 0.0f && decay < 1.0f, "--ema must be in (0, 1) (0 turns it off), got " + std::to_string(decay));
  ema_decay_ = decay;
  ema_.resize(n_);
  for_each_span([&](const Span& s, std::size_t at) {
    std::copy(params + s.offset, params + s.offset + s.count, ema_.data() + at);
  });
}

void Optimizer::update_ema(const float* params) {
  if (!has_ema()) return;
  const double t = double(steps_);
  const float d = float(std::min(double(ema_decay_), (1.0 + t) / (10.0 + t)));
  const float w = 1.0f - d;
  for_each_part([&](const Span& s, std::size_t at) {
    float* e = ema_.data() + at;
    const float* p = params + s.offset;
    for (std::size_t i = 0; i < s.count; ++i) e[i] += w * (p[i] - e[i]);
  });
}

void Optimizer::swap_ema(float* params) {
  if (!has_ema()) return;
  for_each_span([&](const Span& s, std::size_t at) {
    std::swap_ranges(params + s.offset, params + s.offset + s.count, ema_.data() + at);
  });
}

void Optimizer::copy_ema_to(float* params) const {
  if (!has_ema()) return;
  for_each_span([&](const Span& s, std::size_t at) {
    std::copy(ema_.data() + at, ema_.data() + at + s.count, params + s.offset);
  });
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
  for_each_part([&](const Span& s, std::size_t at) {
    adam_step_(params + s.offset, grads + s.offset, exp_avg_.data() + at, exp_avg_sq_.data() + at, s.count, a);
  });
}

std::vector<StateBuffer> Adam::own_state() {
  return {{"exp_avg", exp_avg_.data(), n_}, {"exp_avg_sq", exp_avg_sq_.data(), n_}};
}

Sgd::Sgd(std::size_t n, const SgdOptions& opt) : Optimizer(n, opt.lr), opt_(opt) { momentum_.resize(n); }

void Sgd::step(float* params_all, const float* grads_all) {
  const bool first = steps_ == 0;
  ++steps_;
  for_each_part([&](const Span& s, std::size_t at) {
    float* params = params_all + s.offset;
    const float* grads = grads_all + s.offset;
    float* buf = momentum_.data() + at;
    for (std::size_t i = 0; i < s.count; ++i) {
      float g = grads[i];
      if (opt_.weight_decay != 0.0f) g += opt_.weight_decay * params[i];
      if (opt_.momentum != 0.0f) {
        buf[i] = first ? g : buf[i] * opt_.momentum + g;
        g = opt_.nesterov ? g + opt_.momentum * buf[i] : buf[i];
      }
      params[i] -= lr_ * g;
    }
  });
}

std::vector<StateBuffer> Sgd::own_state() { return {{"momentum_buffer", momentum_.data(), n_}}; }

}  // namespace ringtrain::optim
