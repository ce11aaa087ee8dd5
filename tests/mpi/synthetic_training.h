// Shared by the multi-rank training tests (test_grad_reducer, test_tensor_parallel, test_zoo_data_parallel):
// synthetic digits and one plain training step, so every test compares ranks against one process the same way.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::testing {

struct SyntheticDigits {
  static constexpr int kPixels = 28 * 28, kClasses = 10;
  std::vector<float> images;  // n x 28 x 28, uniform in [0, 1)
  std::vector<uint8_t> labels;
};

// Random pixels and labels from `seed`: enough for the optimizer to move.
inline SyntheticDigits make_synthetic_digits(int64_t n, uint64_t seed) {
  Rng rng(seed);
  SyntheticDigits d;
  d.images.resize(std::size_t(n) * SyntheticDigits::kPixels);
  d.labels.resize(std::size_t(n));
  for (auto& p : d.images) p = rng.uniform();
  for (auto& l : d.labels) l = uint8_t(rng.below(SyntheticDigits::kClasses));
  return d;
}

// One training step on samples [first, first + N): zero the gradients, forward, mean softmax cross-entropy,
// backward (through the reducer's hook, then its wait, when given), a copy of the final gradients when
// grads_after is given, the optimizer's step.
inline void train_step(const ops::KernelTable& k, nn::Model& model, optim::Optimizer& opt, const SyntheticDigits& d,
                       int64_t first, int N, dist::GradReducer* reducer, std::vector<float>* grads_after = nullptr) {
  constexpr int kClasses = SyntheticDigits::kClasses;
  auto& p = model.params();
  std::memset(p.grads(), 0, p.size() * sizeof(float));
  const float* x = d.images.data() + first * SyntheticDigits::kPixels;
  const uint8_t* y = d.labels.data() + first;
  const float* logits = model.forward(k, x, N);
  std::vector<float> probs(std::size_t(N) * kClasses), dlogits(std::size_t(N) * kClasses);
  k.softmax_xent_forward(probs.data(), logits, y, N, kClasses);
  k.softmax_xent_backward(dlogits.data(), probs.data(), y, N, kClasses, 1.0f / float(N));
  if (reducer) {
    model.backward(k, x, dlogits.data(), N, reducer->hook());
    reducer->wait();
  } else {
    model.backward(k, x, dlogits.data(), N);
  }
  if (grads_after) grads_after->assign(p.grads(), p.grads() + p.size());
  opt.step(p.params(), p.grads());
}

}  // namespace ringtrain::testing
