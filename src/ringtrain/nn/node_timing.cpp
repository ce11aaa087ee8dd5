#include "ringtrain/nn/node_timing.h"

#include <algorithm>
#include <chrono>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::nn {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

std::vector<double> time_nodes(Model& model, const ops::KernelTable& k, int batch, int repeats) {
  check(batch >= 1 && repeats >= 1, "node timing: needs a batch and at least one timed pass");
  const std::size_t L = model.layers().size();
  model.reserve(batch);
  // Pixels in [0, 1) as the loader gives them; small logit gradients as a loss would.
  Rng rng(0x71e);
  AlignedBuffer<float> x(std::size_t(batch) * std::size_t(shape_numel(model.input_shape())));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = rng.uniform();
  AlignedBuffer<float> dlogits(std::size_t(batch) * std::size_t(model.num_classes()));
  for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = rng.uniform(-1.0f, 1.0f) / float(batch);
  const bool was_training = model.training();
  model.set_training(true);
  model.set_step(0, 0, nullptr);
  std::vector<std::vector<double>> runs(L, std::vector<double>(std::size_t(repeats), 0.0));
  std::vector<Clock::time_point> marks(L + 1);
  for (int r = -1; r < repeats; ++r) {
    // Forward: node i runs between marks i and i + 1 (the hook fires after each node, in order).
    std::size_t node = 0;
    marks[0] = Clock::now();
    model.forward(k, x.data(), batch, [&] { marks[++node] = Clock::now(); });
    check(node == L, "node timing: the forward's node hook did not fire once a node");
    std::vector<double> fwd(L);
    for (std::size_t i = 0; i < L; ++i) fwd[i] = seconds(marks[i], marks[i + 1]);
    // Backward: the hook fires after each node, last first.
    node = L;
    marks[L] = Clock::now();
    model.backward(k, x.data(), dlogits.data(), batch, [&](const Layer&) { marks[--node] = Clock::now(); });
    check(node == 0, "node timing: the backward's hook did not fire once a node");
    if (r < 0) continue;  // the untimed first pass
    for (std::size_t i = 0; i < L; ++i) runs[i][std::size_t(r)] = fwd[i] + seconds(marks[i + 1], marks[i]);
  }
  model.set_training(was_training);
  std::vector<double> t(L);
  for (std::size_t i = 0; i < L; ++i) t[i] = median(runs[i]);
  return t;
}

}  // namespace ringtrain::nn
