// One torch.optim.Adam update over a flat buffer of n floats, as an op so each ISA can vectorise it.
// Element for element the arithmetic of optim::Adam::step (torch 1.13's single-tensor Adam):
//   g = grad + wd * p;  m = m * b1 + g * (1 - b1);  v = v * b2 + g * g * (1 - b2);
//   p -= step_size * (m / (sqrt(v) / bc2_sqrt + eps))
// with step_size = lr / (1 - b1^t) and bc2_sqrt = sqrt(1 - b2^t) computed by the caller. Every build does
// these float operations in this order without fused multiply-adds, so all levels agree bit for bit.
#pragma once
#include <cstddef>

namespace ringtrain::ops {

struct AdamStep {
  float b1, b2, eps, weight_decay, step_size, bc2_sqrt;
};

namespace ref {
void adam_step(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamStep& a);
}  // namespace ref

}  // namespace ringtrain::ops
