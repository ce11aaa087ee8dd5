// Reference Adam update (the scalar loop of optim::Adam::step).
#include "ringtrain/ops/adam.h"

#include <cmath>

namespace ringtrain::ops::ref {

void adam_step(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamStep& a) {
  for (std::size_t i = 0; i < n; ++i) {
    float g = grads[i];
    if (a.weight_decay != 0.0f) g += a.weight_decay * params[i];
    m[i] = m[i] * a.b1 + g * (1.0f - a.b1);
    v[i] = v[i] * a.b2 + g * g * (1.0f - a.b2);
    const float denom = std::sqrt(v[i]) / a.bc2_sqrt + a.eps;
    params[i] -= a.step_size * (m[i] / denom);
  }
}

}  // namespace ringtrain::ops::ref
