#include "ringtrain/nn/node_timing.h"

#include <algorithm>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::nn {

double median_seconds(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

PassTimes time_pass(Model& model, const ops::KernelTable& k, const float* x, int batch, const LossGradient& loss,
                    const std::function<void()>& after, SecondsClock clock) {
  check(batch >= 1, "node timing: needs a batch of at least one sample");
  check(bool(loss) && clock != nullptr, "node timing: needs a loss and a clock");
  const std::size_t L = model.layers().size();
  model.reserve(batch);
  PassTimes t;
  t.forward.assign(L, 0.0);
  t.backward.assign(L, 0.0);
  const double wall_start = bench::wall_seconds(), start = clock();
  double mark = start;
  // Each part runs from the previous mark to the clock read right after it.
  auto lap = [&] {
    const double now = clock();
    const double s = now - mark;
    mark = now;
    return s;
  };
  // Forward: the hook fires after each node, in order.
  std::size_t node = 0;
  const float* logits = model.forward(k, x, batch, [&] {
    check(node < L, "node timing: the forward's node hook fired more than once a node");
    t.forward[node++] = lap();
  });
  check(node == L, "node timing: the forward's node hook did not fire once a node");
  const float* dlogits = loss(logits);
  t.loss = lap();
  // Backward: the hook fires after each node, last first.
  model.backward(k, x, dlogits, batch, [&](const Layer&) {
    check(node > 0, "node timing: the backward's hook fired more than once a node");
    t.backward[--node] = lap();
  });
  check(node == 0, "node timing: the backward's hook did not fire once a node");
  if (after) after();
  t.after = lap();
  t.total = mark - start;
  t.wall = bench::wall_seconds() - wall_start;
  return t;
}

NodeTimes time_node_passes(Model& model, const ops::KernelTable& k, int batch, int repeats, SecondsClock clock) {
  check(batch >= 1 && repeats >= 1, "node timing: needs a batch and at least one timed pass");
  check(clock != nullptr, "node timing: needs a clock");
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
  // [node][pass]
  std::vector<std::vector<double>> fwd(L), bwd(L), both(L);
  for (int r = -1; r < repeats; ++r) {
    const PassTimes p =
        time_pass(model, k, x.data(), batch, [&](const float*) { return dlogits.data(); }, {}, clock);
    if (r < 0) continue;  // the untimed first pass
    for (std::size_t i = 0; i < L; ++i) {
      fwd[i].push_back(p.forward[i]);
      bwd[i].push_back(p.backward[i]);
      both[i].push_back(p.forward[i] + p.backward[i]);
    }
  }
  model.set_training(was_training);
  NodeTimes t;
  for (std::size_t i = 0; i < L; ++i) {
    t.forward.push_back(median_seconds(fwd[i]));
    t.backward.push_back(median_seconds(bwd[i]));
    t.total.push_back(median_seconds(both[i]));
    t.fastest.push_back(*std::min_element(both[i].begin(), both[i].end()));
  }
  return t;
}

std::vector<double> time_nodes(Model& model, const ops::KernelTable& k, int batch, int repeats) {
  return time_node_passes(model, k, batch, repeats).total;
}

}  // namespace ringtrain::nn
