#include "ringtrain/optim/loss_scaler.h"

#include <cmath>
#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::optim {

LossScaler::LossScaler(const LossScalerOptions& opt) : opt_(opt), scale_(opt.init_scale) {
  check(opt.init_scale > 0 && std::isfinite(opt.init_scale), "loss scaler: initial scale must be positive");
  check(opt.growth_factor > 1 && opt.backoff_factor > 0 && opt.backoff_factor < 1 && opt.growth_interval > 0,
        "loss scaler: growth factor must be > 1, backoff in (0, 1), interval > 0");
}

bool LossScaler::unscale_and_check(float* grads, std::size_t n) const {
  const float inv = 1.0f / scale_;
  // Non-finite = exponent all ones (inf * inv stays inf, NaN stays NaN); an integer OR, so the loop
  // vectorises and the unscale and the check are one pass.
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads[i] * inv;
    grads[i] = g;
    uint32_t u;
    std::memcpy(&u, &g, 4);
    bad |= uint32_t((u & 0x7f800000u) == 0x7f800000u);
  }
  return bad != 0;
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= opt_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == opt_.growth_interval) {
    const float grown = scale_ * opt_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // torch keeps the scale when growth would overflow
    growth_tracker_ = 0;
  }
}

LossScaleStep LossScaler::step(Optimizer& opt, float* params, float* grads, const std::function<bool(bool)>& any_rank) {
  LossScaleStep r;
  r.scale = scale_;
  bool local = false;
  for (const Span& s : opt.spans()) local = unscale_and_check(grads + s.offset, s.count) || local;
  const bool found = any_rank ? any_rank(local) : local;
  if (!found)
    opt.step(params, grads);
  else
    ++skipped_;
  r.applied = !found;
  update(found);
  r.next_scale = scale_;
  return r;
}

}  // namespace ringtrain::optim
