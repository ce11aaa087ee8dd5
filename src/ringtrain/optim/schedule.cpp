#include "ringtrain/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ringtrain/core/error.h"

namespace ringtrain::optim {

void check_schedule(const LrSchedule& s) {
  check(s.kind == "constant" || s.kind == "linear" || s.kind == "cosine" || s.kind == "step",
        "--lr-schedule must be constant, linear, cosine or step, got '" + s.kind + "'");
  check(s.base_lr > 0, "--lr must be positive");
  check(s.epochs > 0, "--epochs must be positive");
  check(s.decay_epochs >= 0, "--lr-decay-epochs must be >= 0");
  check(s.min_factor >= 0 && s.min_factor <= 1, "--lr-min-factor must be in [0, 1]");
}

double scheduled_lr(const LrSchedule& s, double position) {
  if (s.kind == "constant") return s.base_lr;
  const double window = s.decay_epochs > 0 ? std::min(s.decay_epochs, s.epochs) : s.epochs;
  const double start = s.epochs - window;
  if (position < start) return s.base_lr;
  const double t = std::clamp((position - start) / window, 0.0, 1.0);
  if (s.kind == "step") return s.base_lr * s.min_factor;
  if (s.kind == "linear") return s.base_lr * (1.0 - (1.0 - s.min_factor) * t);
  return s.base_lr * (s.min_factor + (1.0 - s.min_factor) * 0.5 * (1.0 + std::cos(std::numbers::pi * t)));
}

}  // namespace ringtrain::optim
