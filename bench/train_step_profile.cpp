#include "train_step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "ringtrain/core/peak.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::bench {

namespace {

// Times are this thread's CPU time (core/peak.h's clock, as bench_peak and bench_ops use): on a shared machine the
// time the step actually ran, so the % of peak compares like with like. The whole step's wall time is kept too.
using nn::median_seconds;
using nn::SecondsClock;

// One precision's model, optimizer and per-step timings.
struct Run {
  const ops::KernelTable* k = nullptr;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Adam> adam;
  std::vector<float> probs, dlogits;
  std::vector<std::vector<double>> fwd, bwd;  // [node][step] seconds
  std::vector<double> loss_t, adam_t, total, wall;
};

// One real step of r (softmax cross-entropy, Adam), timed node by node by nn::time_pass.
void timed_step(Run& r, const float* xb, const uint8_t* yb, int batch, bool keep, SecondsClock clock) {
  const ops::KernelTable& k = *r.k;
  const int classes = r.model->num_classes();
  auto loss = [&](const float* logits) {
    k.softmax_xent_forward(r.probs.data(), logits, yb, batch, classes);
    k.softmax_xent_backward(r.dlogits.data(), r.probs.data(), yb, batch, classes, 1.0f / float(batch));
    return static_cast<const float*>(r.dlogits.data());
  };
  auto adam = [&] { r.adam->step(r.model->params().params(), r.model->params().grads()); };
  const nn::PassTimes t = nn::time_pass(*r.model, k, xb, batch, loss, adam, clock);
  if (!keep) return;
  for (std::size_t i = 0; i < t.forward.size(); ++i) {
    r.fwd[i].push_back(t.forward[i]);
    r.bwd[i].push_back(t.backward[i]);
  }
  r.loss_t.push_back(t.loss);
  r.adam_t.push_back(t.after);
  r.total.push_back(t.total);
  r.wall.push_back(t.wall);
}

// The summary's group of a node: its name with block numbers folded ("encoder.layers.encoder_layer_3.mlp.0" ->
// "encoder.layers.encoder_layer_*.mlp.0", "layer1.0.conv1" -> "layer1.*.conv1"): every dot-separated part but
// the last that is a number, or ends in "_<number>", has the number replaced by *.
std::string fold_block_numbers(const std::string& name) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = name.find('.', at);
    std::string part = name.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (dot == std::string::npos) return out + part;
    std::size_t digits = part.size();
    while (digits > 0 && part[digits - 1] >= '0' && part[digits - 1] <= '9') --digits;
    if (digits < part.size() && (digits == 0 || part[digits - 1] == '_')) part = part.substr(0, digits) + "*";
    out += part + ".";
    at = dot + 1;
  }
}

}  // namespace

int profile_train_step(const ProfileOptions& o, const std::vector<float>& x, const std::vector<uint8_t>& y,
                       int nbatches) {
  std::vector<Run> runs(o.precisions.size());
  for (std::size_t p = 0; p < runs.size(); ++p) {
    Run& r = runs[p];
    r.k = &ops::kernels_for(o.level, o.precisions[p]);
    r.model = nn::make_model(o.model);
    r.model->init_parameters(0);
    r.model->set_threads(o.threads);
    r.model->reserve(o.batch);
    r.adam = std::make_unique<optim::Adam>(r.model->params().size(), optim::AdamOptions{});
    r.adam->use_kernels(*r.k);
    r.adam->set_thread_pool(r.model->thread_pool());  // as the trainer does
    r.probs.resize(std::size_t(o.batch) * r.model->num_classes());
    r.dlogits.resize(r.probs.size());
    r.fwd.resize(r.model->layers().size());
    r.bwd.resize(r.model->layers().size());
  }
  const nn::Model& m = *runs[0].model;
  const double step_flop = m.train_flops_per_sample() * o.batch;
  const int steps = o.steps > 0 ? o.steps : std::clamp(int(3e11 / step_flop), 10, 400);
  const int warm = std::max(3, steps / 10);
  // One thread: its CPU time (what the step costs when it has the core). Several: the wall clock, since the
  // calling thread's CPU time would miss the waits for the other slices.
  const SecondsClock clock = o.threads > 1 ? SecondsClock(wall_seconds) : SecondsClock(thread_cpu_seconds);
  const std::size_t per_image = 28 * 28;
  for (int i = 0; i < warm + steps; ++i)
    for (Run& r : runs)  // alternating: a load change hits every precision alike
      timed_step(r, x.data() + std::size_t(i % nbatches) * o.batch * per_image,
                 y.data() + std::size_t(i % nbatches) * o.batch, o.batch, i >= warm, clock);

  // After the steps (the clock has ramped up). A run forced to avx2 on an AVX-512 CPU is held to the ymm FMA rate,
  // the most its kernels can reach; every other level to the CPU's best.
  const bool zmm = o.level != ops::IsaLevel::Avx2 && cpu_has("avx512f");
  const double peak = fp32_peak_gflops_of(zmm) * o.threads;
  const double total_us = median_seconds(runs[0].total) * 1e6;
  std::printf("per-layer step profile: model=%s isa=%s batch=%d threads=%d steps=%d (after %d warm-up; precisions "
              "alternating), median us of %s per step; fp32 peak %.1f GFLOP/s (measured, %s FMA%s)\n",
              o.model.c_str(), ops::isa_name(o.level), o.batch, o.threads, steps, warm,
              o.threads > 1 ? "the calling thread's wall time" : "thread CPU time", peak, zmm ? "zmm" : "ymm",
              o.threads > 1 ? ", x threads" : "");
  std::size_t width = 22;
  for (const auto& l : m.layers()) width = std::max(width, l->name().size() + 9);
  std::printf("  %-*s %9s %6s %9s %8s %6s", int(width), "node pass", ops::precision_name(o.precisions[0]), "%step",
              "MFLOP", "GFLOP/s", "%peak");
  for (std::size_t p = 1; p < runs.size(); ++p)
    std::printf(" %9s %9s", ops::precision_name(o.precisions[p]), "ratio");
  std::printf("\n");
  // A row: the main precision's median, its share of the step, and (flop > 0) its rate; the others' medians and
  // the main one's time over theirs.
  auto row = [&](const std::string& name, auto samples_of, double flop) {
    const double us = median_seconds(samples_of(runs[0])) * 1e6;
    std::printf("  %-*s %9.1f %6.1f", int(width), name.c_str(), us, 100.0 * us / total_us);
    if (flop > 0 && us > 0)
      std::printf(" %9.1f %8.1f %6.1f", flop * 1e-6, flop / us * 1e-3, 100.0 * flop / us * 1e-3 / peak);
    else
      std::printf(" %9s %8s %6s", "", "", "");
    for (std::size_t p = 1; p < runs.size(); ++p) {
      const double other = median_seconds(samples_of(runs[p])) * 1e6;
      std::printf(" %9.1f %8.2fx", other, us / other);
    }
    std::printf("\n");
  };
  const auto& layers = m.layers();
  for (std::size_t l = 0; l < layers.size(); ++l)
    row(layers[l]->name() + " fwd", [&](Run& r) { return r.fwd[l]; }, 2.0 * layers[l]->forward_macs() * o.batch);
  row("softmax_xent", [](Run& r) { return r.loss_t; }, 0.0);
  for (std::size_t l = layers.size(); l-- > 0;)
    row(layers[l]->name() + " bwd", [&](Run& r) { return r.bwd[l]; }, 2.0 * m.backward_macs(l) * o.batch);
  row("adam", [](Run& r) { return r.adam_t; }, 0.0);
  row("total (whole step)", [](Run& r) { return r.total; }, step_flop);

  // The same, main precision only, summed over the blocks (names folded) and sorted by time: where to look.
  struct Group {
    double fwd_us = 0, bwd_us = 0, fwd_flop = 0, bwd_flop = 0;
  };
  std::map<std::string, Group> groups;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    Group& g = groups[fold_block_numbers(layers[l]->name())];
    g.fwd_us += median_seconds(runs[0].fwd[l]) * 1e6;
    g.bwd_us += median_seconds(runs[0].bwd[l]) * 1e6;
    g.fwd_flop += 2.0 * layers[l]->forward_macs() * o.batch;
    g.bwd_flop += 2.0 * m.backward_macs(l) * o.batch;
  }
  std::vector<std::pair<std::string, Group>> sorted(groups.begin(), groups.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.fwd_us + a.second.bwd_us > b.second.fwd_us + b.second.bwd_us;
  });
  std::printf("\nby layer, blocks summed (%s), sorted by time: us per step (%% of step), %% of peak\n",
              ops::precision_name(o.precisions[0]));
  std::printf("  %-*s %9s %6s %9s %6s %9s %6s\n", int(width), "layer", "fwd us", "%peak", "bwd us", "%peak", "both",
              "%step");
  auto pct_peak = [&](double flop, double us) { return us > 0 ? 100.0 * flop / us * 1e-3 / peak : 0.0; };
  for (const auto& [name, g] : sorted)
    std::printf("  %-*s %9.1f %6.1f %9.1f %6.1f %9.1f %6.1f\n", int(width), name.c_str(), g.fwd_us,
                pct_peak(g.fwd_flop, g.fwd_us), g.bwd_us, pct_peak(g.bwd_flop, g.bwd_us), g.fwd_us + g.bwd_us,
                100.0 * (g.fwd_us + g.bwd_us) / total_us);
  std::printf("whole step: %.1f ms %s, %.2f GFLOP (%.1f MFLOP a sample), %.1f GFLOP/s = %.1f%% of peak, %.0f samples "
              "per %s second (wall: %.1f ms a step, %.0f samples/s)\n",
              total_us * 1e-3, o.threads > 1 ? "wall" : "CPU", step_flop * 1e-9, step_flop / o.batch * 1e-6, step_flop / total_us * 1e-3,
              pct_peak(step_flop, total_us), o.batch / (total_us * 1e-6), o.threads > 1 ? "wall" : "CPU", median_seconds(runs[0].wall) * 1e3,
              o.batch / median_seconds(runs[0].wall));
  return 0;
}

}  // namespace ringtrain::bench
