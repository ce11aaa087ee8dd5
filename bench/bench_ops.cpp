// Every op pass of a LeNet-5 step at batch 256 on one thread (Google Benchmark): GFLOP/s from the op's
// own multiply-add count and % of this core's measured fp32 peak (bench/peak.h), with oneDNN's figure
// beside each convolution pass (oneDNN in its preferred layouts, primitives and data prepared outside
// the timing). Validates every kernel against the reference (and oneDNN against ringtrain) first.
//
//   bench_ops [--batch 256] [Google Benchmark flags, e.g. --benchmark_filter=conv2]
//   RINGTRAIN_ISA=avx2 bench_ops     (another kernel level; default: the best this CPU runs)
//   bench_ops --precision bf16       (the kernels of another compute precision, ops/lowp.h; default fp32)
//   bench_ops --zoo-batch 64 --benchmark_filter=zoo   (the zoo's conv shapes: resnet18, mobilenet_v2, ViT;
//                                       resnet18's stem max-pool in GB/s and % of a copy's bandwidth)
//   bench_ops --zoo-bf16 [--reps 15] [--zoo-filter resnet18]   (only the zoo's conv passes: fp32, bf16 and bf16's rounding fallback
//                                       side by side, medians of alternating timings, then exit)
//
// Ends with the issue-3 comparison: the five convolution passes of a step (conv1 forward and
// backward-weight, conv2 forward, backward-data and backward-weight), ringtrain vs oneDNN, as the
// median of 15 alternating timings of each side. All times are CPU time (Google Benchmark's "CPU"
// column; the peak too), which on a quiet machine equals wall time and on a shared one excludes
// the time other processes took.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bandwidth.h"
#include "random_data.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"
#ifdef RINGTRAIN_HAVE_DNNL
#include "ringtrain/ops/dnnl/conv_dnnl.h"
#endif

using namespace ringtrain;

namespace {

int g_batch = 256;
int g_zoo_batch = 64;  // the zoo models' training batch
double g_peak = 0.0;  // GFLOP/s
const ops::KernelTable* g_k = nullptr;

using bench::random_vec;

ops::Conv2dShape conv1_shape() {
  ops::Conv2dShape s;
  s.N = g_batch, s.C = 1, s.H = 28, s.W = 28, s.K = 6, s.R = 5, s.S = 5, s.stride = 1, s.pad = 2;
  return s;
}
ops::Conv2dShape conv2_shape() {
  ops::Conv2dShape s;
  s.N = g_batch, s.C = 6, s.H = 14, s.W = 14, s.K = 16, s.R = 5, s.S = 5, s.stride = 1, s.pad = 0;
  return s;
}

// The zoo's conv shapes at batch g_zoo_batch (28x28x1 inputs), named model/layer.
struct ZooShape {
  const char* name;
  ops::Conv2dShape s;
};
std::vector<ZooShape> zoo_shapes() {
  auto c = [](int C, int HW, int K, int k, int st, int pad, int groups = 1) {
    ops::Conv2dShape s;
    s.N = g_zoo_batch, s.C = C, s.H = s.W = HW, s.K = K, s.R = s.S = k, s.stride = st, s.pad = pad, s.groups = groups;
    return s;
  };
  return {{"resnet18 stem 1x28x28->64 k7s2", c(1, 28, 64, 7, 2, 3)},
          {"resnet18 64x7x7->64 k3", c(64, 7, 64, 3, 1, 1)},
          {"resnet18 64x7x7->128 k3s2", c(64, 7, 128, 3, 2, 1)},
          {"resnet18 64x7x7->128 k1s2", c(64, 7, 128, 1, 2, 0)},
          {"resnet18 128x4x4->128 k3", c(128, 4, 128, 3, 1, 1)},
          {"resnet18 128x4x4->256 k3s2", c(128, 4, 256, 3, 2, 1)},
          {"resnet18 256x2x2->256 k3", c(256, 2, 256, 3, 1, 1)},
          {"resnet18 256x2x2->512 k3s2", c(256, 2, 512, 3, 2, 1)},
          {"resnet18 512x1x1->512 k3", c(512, 1, 512, 3, 1, 1)},
          {"mobilenet_v2 stem 1x28x28->32 k3s2", c(1, 28, 32, 3, 2, 1)},
          {"mobilenet_v2 dw 96x14x14 s2", c(96, 14, 96, 3, 2, 1, 96)},
          {"mobilenet_v2 dw 144x7x7 s1", c(144, 7, 144, 3, 1, 1, 144)},
          {"mobilenet_v2 pw 16x14x14->96", c(16, 14, 96, 1, 1, 0)},
          {"mobilenet_v2 pw 144x7x7->24", c(144, 7, 24, 1, 1, 0)},
          {"mobilenet_v2 pw 960x1x1->320", c(960, 1, 320, 1, 1, 0)},
          {"vit patch 1x28x28->128 k7s7", c(1, 28, 128, 7, 7, 0)}};
}

// Buffers of one convolution layer, filled with random data.
struct ConvData {
  ops::Conv2dShape s;
  std::vector<float> x, w, b, y, dy, dx, dw, db, pooled, dpooled, saved;
  explicit ConvData(const ops::Conv2dShape& shape, bool fused = true) : s(shape) {
    x = random_vec(std::size_t(s.N) * s.C * s.H * s.W, 1);
    w = random_vec(std::size_t(s.K) * s.Cg() * s.R * s.S, 2);
    b = random_vec(s.K, 3);
    y.resize(std::size_t(s.N) * s.K * s.P() * s.Q());
    dy = random_vec(y.size(), 4);
    dx.resize(x.size());
    dw.resize(w.size());
    db.resize(b.size());
    if (!fused) return;
    pooled.resize(y.size() / 4);
    dpooled = random_vec(pooled.size(), 5);
    if (g_k->conv2d_relu_pool_saved) saved.resize(g_k->conv2d_relu_pool_saved(s));
  }
};

void set_counters(benchmark::State& state, double flop) {
  state.counters["GFLOP/s"] = benchmark::Counter(flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["%peak"] = benchmark::Counter(flop * 1e-9 * 100.0 / g_peak, benchmark::Counter::kIsIterationInvariantRate);
}

void add(const std::string& name, double flop, std::function<void()> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [flop, fn](benchmark::State& state) {
    for (auto _ : state) fn();
    set_counters(state, flop);
  })->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

using bench::copy_bandwidth_gbs;
using bench::process_cpu_seconds;

// A memory-bound op: GB/s from the bytes it must read and write once, and % of a copy's bandwidth `bw` at
// about the same size.
void add_bytes(const std::string& name, double bytes, double bw, std::function<void()> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [bytes, bw, fn](benchmark::State& state) {
    for (auto _ : state) fn();
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["%copy_bw"] = benchmark::Counter(bytes * 1e-9 * 100.0 / bw, benchmark::Counter::kIsIterationInvariantRate);
  })->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

// Median of `reps` alternating timings of a and b (seconds per call each), in process CPU time (so
// a shared machine's other load does not count, and any helper thread oneDNN starts does).
std::pair<double, double> alternate(const std::function<void()>& a, const std::function<void()>& b, int reps = 15) {
  std::vector<double> ta, tb;
  auto time = [](const std::function<void()>& f) {
    const double t0 = process_cpu_seconds();
    f();
    return process_cpu_seconds() - t0;
  };
  a(), b();
  for (int r = 0; r < reps; ++r) {
    ta.push_back(time(a));
    tb.push_back(time(b));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[reps / 2], tb[reps / 2]};
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) scale = std::max(scale, double(std::fabs(b[i])));
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / scale);
  return worst;
}

// The zoo's conv passes at fp32, bf16 (vdpbf16ps where the CPU has AVX512_BF16) and bf16's rounding fallback
// (bf16-rounded operands into the fp32 kernels: what bf16 ran before the native kernels, and still runs on CPUs
// without AVX512_BF16), all at the default ISA level, timed round-robin `reps` times each in one run (process
// CPU time, medians): the ratios come from the same minutes of the same (shared) machine.
int zoo_bf16_side_by_side(int reps, const char* filter) {
  const ops::IsaLevel level = ops::default_isa();
  const ops::KernelTable& f32 = ops::kernels_for(level);
  const ops::KernelTable& b16 = ops::kernels_for(level, ops::Precision::Bf16);
  const ops::KernelTable& rnd = ops::rounding_kernels_for(level, ops::Precision::Bf16);
  const double bf_peak = bench::cpu_has("avx512bf16") ? bench::measure_gflops(bench::dpbf16_loop, bench::kDpbf16Flop) : 0.0;
  std::printf("zoo conv passes, batch %d, %s, one thread; medians of %d round-robin timings (process CPU time)\n"
              "peaks measured now: fp32 FMA %.1f GFLOP/s, vdpbf16ps %.1f GFLOP/s%s\n",
              g_zoo_batch, ops::isa_name(level), reps, g_peak, bf_peak,
              bf_peak > 0 ? "" : " (no AVX512_BF16: bf16 is the rounding fallback)");
  std::printf("%-40s %-15s %9s %9s %9s %7s %7s %8s %7s %7s\n", "shape", "pass", "fp32 us", "bf16 us", "round us",
              "fp32/bf", "rnd/bf", "bf GF/s", "%bfpk", "%fp32pk");
  double tot[3] = {0, 0, 0};
  for (const ZooShape& z : zoo_shapes()) {
    if (filter && !std::strstr(z.name, filter)) continue;
    ConvData c(z.s, false);
    const double flop = c.s.macs() * 2;
    const char* pass_names[3] = {"forward", "backward_data", "backward_weight"};
    for (int pass = 0; pass < 3; ++pass) {
      auto call = [&](const ops::KernelTable& k) {
        if (pass == 0) k.conv2d_forward(c.y.data(), c.x.data(), c.w.data(), nullptr, c.s);
        if (pass == 1) k.conv2d_backward_data(c.dx.data(), c.dy.data(), c.w.data(), c.s);
        if (pass == 2) k.conv2d_backward_weight(c.dw.data(), nullptr, c.dy.data(), c.x.data(), c.s);
      };
      const ops::KernelTable* tables[3] = {&f32, &b16, &rnd};
      std::vector<double> t[3];
      for (auto* k : tables) call(*k);  // warm-up: scratch grown, caches filled
      for (int r = 0; r < reps; ++r)
        for (int i = 0; i < 3; ++i) {
          const double t0 = process_cpu_seconds();
          call(*tables[i]);
          t[i].push_back(process_cpu_seconds() - t0);
        }
      double med[3];
      for (int i = 0; i < 3; ++i) {
        std::sort(t[i].begin(), t[i].end());
        med[i] = t[i][reps / 2];
        tot[i] += med[i];
      }
      const double gf = flop / med[1] * 1e-9;
      std::printf("%-40s %-15s %9.1f %9.1f %9.1f %7.2f %7.2f %8.1f %7.1f %7.1f\n", z.name, pass_names[pass], med[0] * 1e6,
                  med[1] * 1e6, med[2] * 1e6, med[0] / med[1], med[2] / med[1], gf, bf_peak > 0 ? 100 * gf / bf_peak : 0.0,
                  100 * gf / g_peak);
    }
  }
  std::printf("%-56s %9.1f %9.1f %9.1f %7.2f %7.2f\n", "sum of the medians", tot[0] * 1e6, tot[1] * 1e6, tot[2] * 1e6,
              tot[0] / tot[1], tot[2] / tot[1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_NUM_THREADS", "1", 1);  // oneDNN (OpenMP build) on one thread, like ringtrain here
  ops::Precision precision = ops::Precision::Fp32;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--batch") == 0) g_batch = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--precision") == 0) precision = ops::parse_precision(argv[i + 1]);
    if (std::strcmp(argv[i], "--zoo-batch") == 0) g_zoo_batch = std::atoi(argv[i + 1]);
  }
  g_k = &ops::kernels_for(ops::default_isa(), precision);
  g_peak = bench::fp32_peak_gflops();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--zoo-bf16") == 0) {
      int reps = 15;
      const char* filter = nullptr;
      for (int j = 1; j + 1 < argc; ++j) {
        if (std::strcmp(argv[j], "--reps") == 0) reps = std::atoi(argv[j + 1]);
        if (std::strcmp(argv[j], "--zoo-filter") == 0) filter = argv[j + 1];
      }
      return zoo_bf16_side_by_side(reps, filter);
    }
  std::printf("ringtrain kernels: %s %s, batch %d, one thread; measured fp32 peak of this core: %.1f GFLOP/s\n",
              ops::isa_name(g_k->level), ops::precision_name(precision), g_batch, g_peak);

  static ConvData c1(conv1_shape()), c2(conv2_shape());
  const ops::KernelTable& k = *g_k;

  // ---- validation: each fast pass against the reference kernels on the benchmark's own data ----
  {
    const ops::KernelTable& r = ops::reference_kernels();
    std::vector<float> want_y(c2.y.size()), want_dx(c2.x.size()), want_dw(c2.w.size()), want_db(c2.b.size());
    k.conv2d_forward(c2.y.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    r.conv2d_forward(want_y.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    k.conv2d_backward_data(c2.dx.data(), c2.dy.data(), c2.w.data(), c2.s);
    r.conv2d_backward_data(want_dx.data(), c2.dy.data(), c2.w.data(), c2.s);
    k.conv2d_backward_weight(c2.dw.data(), c2.db.data(), c2.dy.data(), c2.x.data(), c2.s);
    r.conv2d_backward_weight(want_dw.data(), want_db.data(), c2.dy.data(), c2.x.data(), c2.s);
    std::printf("validation vs reference (conv2, max |diff| / max |ref|): forward %.1e, backward-data %.1e, "
                "backward-weight %.1e\n",
                max_rel_diff(c2.y, want_y), max_rel_diff(c2.dx, want_dx), max_rel_diff(c2.dw, want_dw));
  }

  const double m1 = c1.s.macs() * 2, m2 = c2.s.macs() * 2;  // FLOP of one conv pass
  // ---- convolutions: the five unfused passes, then the fused layers as the model runs them ----
  add("conv1/forward", m1, [&] { k.conv2d_forward(c1.y.data(), c1.x.data(), c1.w.data(), c1.b.data(), c1.s); });
  add("conv1/backward_weight", m1,
      [&] { k.conv2d_backward_weight(c1.dw.data(), c1.db.data(), c1.dy.data(), c1.x.data(), c1.s); });
  add("conv2/forward", m2, [&] { k.conv2d_forward(c2.y.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s); });
  add("conv2/backward_data", m2, [&] { k.conv2d_backward_data(c2.dx.data(), c2.dy.data(), c2.w.data(), c2.s); });
  add("conv2/backward_weight", m2,
      [&] { k.conv2d_backward_weight(c2.dw.data(), c2.db.data(), c2.dy.data(), c2.x.data(), c2.s); });
  if (k.conv2d_relu_pool_forward) {
    add("conv1+relu+pool/forward (fused)", m1, [&] {
      k.conv2d_relu_pool_forward(c1.pooled.data(), c1.saved.data(), c1.x.data(), c1.w.data(), c1.b.data(), c1.s);
    });
    add("conv1+relu+pool/backward_weight (fused)", m1, [&] {
      k.conv2d_relu_pool_backward(nullptr, c1.dw.data(), c1.db.data(), c1.dpooled.data(), c1.saved.data(),
                                  c1.w.data(), c1.s);
    });
    add("conv2+relu+pool/forward (fused)", m2, [&] {
      k.conv2d_relu_pool_forward(c2.pooled.data(), c2.saved.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    });
    add("conv2+relu+pool/backward_data+weight (fused)", 2 * m2, [&] {
      k.conv2d_relu_pool_backward(c2.dx.data(), c2.dw.data(), c2.db.data(), c2.dpooled.data(), c2.saved.data(),
                                  c2.w.data(), c2.s);
    });
  }
#ifdef RINGTRAIN_HAVE_DNNL
  static ops::dnnl_rival::Conv2d d1(c1.s), d2(c2.s);
  for (auto [d, c] : {std::pair{&d1, &c1}, std::pair{&d2, &c2}}) {
    d->set_input(c->x.data());
    d->set_weight(c->w.data(), c->b.data());
    d->set_dout(c->dy.data());
  }
  {
    std::vector<float> y(c2.y.size()), dx(c2.x.size()), dw(c2.w.size()), db(c2.b.size());
    d2.forward(), d2.backward_data(), d2.backward_weight();
    d2.get_output(y.data()), d2.get_dinp(dx.data()), d2.get_dweight(dw.data(), db.data());
    k.conv2d_forward(c2.y.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    k.conv2d_backward_data(c2.dx.data(), c2.dy.data(), c2.w.data(), c2.s);
    k.conv2d_backward_weight(c2.dw.data(), c2.db.data(), c2.dy.data(), c2.x.data(), c2.s);
    std::printf("oneDNN %s\n  (conv1: %s)\nvalidation oneDNN vs ringtrain (conv2): forward %.1e, backward-data %.1e, "
                "backward-weight %.1e\n",
                d2.implementation().c_str(), d1.implementation().c_str(), max_rel_diff(y, c2.y),
                max_rel_diff(dx, c2.dx), max_rel_diff(dw, c2.dw));
  }
  add("oneDNN conv1/forward", m1, [&] { d1.forward(); });
  add("oneDNN conv1/backward_weight", m1, [&] { d1.backward_weight(); });
  add("oneDNN conv2/forward", m2, [&] { d2.forward(); });
  add("oneDNN conv2/backward_data", m2, [&] { d2.backward_data(); });
  add("oneDNN conv2/backward_weight", m2, [&] { d2.backward_weight(); });
#endif

  // ---- the zoo's convolutions (batch g_zoo_batch): the three passes, oneDNN beside where it has groups 1 ----
  static std::vector<std::unique_ptr<ConvData>> zoo;
#ifdef RINGTRAIN_HAVE_DNNL
  static std::vector<std::unique_ptr<ops::dnnl_rival::Conv2d>> zoo_dnnl;
#endif
  for (const ZooShape& z : zoo_shapes()) {
    zoo.push_back(std::make_unique<ConvData>(z.s, false));
    ConvData* c = zoo.back().get();
    {  // validation against the reference kernels (no bias: the zoo's convs mostly precede batch norm)
      const ops::KernelTable& r = ops::reference_kernels();
      std::vector<float> want_y(c->y.size()), want_dx(c->x.size()), want_dw(c->w.size());
      k.conv2d_forward(c->y.data(), c->x.data(), c->w.data(), nullptr, c->s);
      r.conv2d_forward(want_y.data(), c->x.data(), c->w.data(), nullptr, c->s);
      k.conv2d_backward_data(c->dx.data(), c->dy.data(), c->w.data(), c->s);
      r.conv2d_backward_data(want_dx.data(), c->dy.data(), c->w.data(), c->s);
      k.conv2d_backward_weight(c->dw.data(), nullptr, c->dy.data(), c->x.data(), c->s);
      r.conv2d_backward_weight(want_dw.data(), nullptr, c->dy.data(), c->x.data(), c->s);
      std::printf("validation vs reference (%s, batch %d): forward %.1e, backward-data %.1e, backward-weight %.1e\n",
                  z.name, g_zoo_batch, max_rel_diff(c->y, want_y), max_rel_diff(c->dx, want_dx),
                  max_rel_diff(c->dw, want_dw));
    }
    const double f = c->s.macs() * 2;
    const std::string name = std::string("zoo ") + z.name;
    add(name + "/forward", f, [c, &k] { k.conv2d_forward(c->y.data(), c->x.data(), c->w.data(), nullptr, c->s); });
    add(name + "/backward_data", f, [c, &k] { k.conv2d_backward_data(c->dx.data(), c->dy.data(), c->w.data(), c->s); });
    add(name + "/backward_weight", f,
        [c, &k] { k.conv2d_backward_weight(c->dw.data(), nullptr, c->dy.data(), c->x.data(), c->s); });
#ifdef RINGTRAIN_HAVE_DNNL
    if (c->s.groups == 1) {
      zoo_dnnl.push_back(std::make_unique<ops::dnnl_rival::Conv2d>(c->s));
      ops::dnnl_rival::Conv2d* d = zoo_dnnl.back().get();
      d->set_input(c->x.data());
      d->set_weight(c->w.data(), c->b.data());
      d->set_dout(c->dy.data());
      add("oneDNN " + name + "/forward", f, [d] { d->forward(); });
      add("oneDNN " + name + "/backward_data", f, [d] { d->backward_data(); });
      add("oneDNN " + name + "/backward_weight", f, [d] { d->backward_weight(); });
    }
#endif
  }

  // ---- linear layers, activations, pooling, loss ----
  struct Lin {
    const char* name;
    ops::LinearShape s;
    bool dinp;
  };
  static std::vector<std::vector<float>> keep;
  for (Lin l : {Lin{"fc1", {g_batch, 400, 120}, true}, Lin{"fc2", {g_batch, 120, 84}, true}, Lin{"fc3", {g_batch, 84, 10}, true}}) {
    keep.push_back(random_vec(std::size_t(l.s.N) * l.s.I, 6));
    float* x = keep.back().data();
    keep.push_back(random_vec(std::size_t(l.s.O) * l.s.I, 7));
    float* w = keep.back().data();
    keep.push_back(random_vec(std::size_t(l.s.N) * l.s.O, 8));
    float* dy = keep.back().data();
    keep.emplace_back(std::size_t(l.s.N) * l.s.O + std::size_t(l.s.N) * l.s.I + std::size_t(l.s.O) * (l.s.I + 1));
    float* y = keep.back().data();
    float* dx = y + std::size_t(l.s.N) * l.s.O;
    float* dw = dx + std::size_t(l.s.N) * l.s.I;
    float* db = dw + std::size_t(l.s.O) * l.s.I;
    const ops::LinearShape s = l.s;
    const std::string name = l.name;
    add(name + "/forward", s.macs() * 2, [=, &k] { k.linear_forward(y, x, w, w, s); });
    add(name + "/backward_data+weight", s.macs() * 4,
        [=, &k] { k.linear_backward(dx, dw, db, dy, x, w, s); });
  }
  static std::vector<float> act = random_vec(std::size_t(g_batch) * 120, 9), act_out(act.size());
  add("relu(fc1)/forward", 0, [&] { k.relu_forward(act_out.data(), act.data(), int64_t(act.size())); });
  add("relu(fc1)/backward", 0, [&] { k.relu_backward(act_out.data(), act.data(), act.data(), int64_t(act.size())); });
  static std::vector<float> pin = random_vec(std::size_t(g_batch) * 6 * 28 * 28, 10), pout(pin.size() / 4);
  static std::vector<uint8_t> pam(pout.size());
  const ops::PoolShape ps{g_batch * 6, 28, 28, 2};
  // Max-pool passes, memory-bound: forward reads the input, writes the output and the argmax bytes; backward
  // reads dout and the argmax, writes the input gradient.
  auto pool_bytes = [](const ops::PoolShape& s) {
    const double in = double(s.NC) * s.H * s.W * 4, out = double(s.NC) * s.P() * s.Q();
    return std::pair{in + out * 5, out * 5 + in};
  };
  const auto [lf, lb] = pool_bytes(ps);
  const double lbw = copy_bandwidth_gbs(std::size_t(lf));
  add_bytes("maxpool(conv1)/forward (unfused)", lf, lbw, [&, ps] { k.maxpool2d_forward(pout.data(), pam.data(), pin.data(), ps); });
  add_bytes("maxpool(conv1)/backward (unfused)", lb, lbw, [&, ps] { k.maxpool2d_backward(pin.data(), pout.data(), pam.data(), ps); });
  // resnet18's stem pool (3x3, stride 2, padding 1: 64 channels of 14x14 -> 7x7 at the zoo's 28x28 input), batch
  // g_zoo_batch, validated bit for bit against the reference first.
  ops::PoolShape rs{g_zoo_batch * 64, 14, 14, 3};
  rs.stride = 2, rs.pad = 1;
  static std::vector<float> rin = random_vec(std::size_t(rs.NC) * 14 * 14, 14), rout(std::size_t(rs.NC) * 49),
                            rdin(rin.size());
  static std::vector<uint8_t> ram(rout.size());
  {
    std::vector<float> wout(rout.size()), wdin(rin.size());
    std::vector<uint8_t> wam(ram.size());
    k.maxpool2d_forward(rout.data(), ram.data(), rin.data(), rs);
    k.maxpool2d_backward(rdin.data(), rout.data(), ram.data(), rs);
    ops::reference_kernels().maxpool2d_forward(wout.data(), wam.data(), rin.data(), rs);
    ops::reference_kernels().maxpool2d_backward(wdin.data(), wout.data(), wam.data(), rs);
    const bool same = rout == wout && ram == wam && rdin == wdin;
    std::printf("validation vs reference (resnet18 stem max-pool, batch %d): %s\n", g_zoo_batch,
                same ? "bit for bit" : "MISMATCH");
  }
  const auto [rf, rb] = pool_bytes(rs);
  const double rbw = copy_bandwidth_gbs(std::size_t(rf));
  std::printf("copy bandwidth at the pools' sizes: %.1f GB/s (%.1f MB, LeNet conv1), %.1f GB/s (%.1f MB, resnet18 stem)\n",
              lbw, lf * 1e-6, rbw, rf * 1e-6);
  add_bytes("zoo resnet18/maxpool/forward", rf, rbw, [&, rs] { k.maxpool2d_forward(rout.data(), ram.data(), rin.data(), rs); });
  add_bytes("zoo resnet18/maxpool/backward", rb, rbw, [&, rs] { k.maxpool2d_backward(rdin.data(), rout.data(), ram.data(), rs); });
  static std::vector<float> logits = random_vec(std::size_t(g_batch) * 10, 11), probs(logits.size());
  static std::vector<uint8_t> labels(g_batch, 3);
  add("softmax_xent/forward+backward", 0, [&] {
    k.softmax_xent_forward(probs.data(), logits.data(), labels.data(), g_batch, 10);
    k.softmax_xent_backward(probs.data(), probs.data(), labels.data(), g_batch, 10, 1.0f / g_batch);
  });

  static std::vector<float> ap = random_vec(61706, 12), ag = random_vec(61706, 13), am(61706), av(61706);
  const ops::AdamStep astep{0.9f, 0.999f, 1e-8f, 0.0f, 1e-3f, 0.03f};
  add("adam_step (61,706 parameters)", 0,
      [&, astep] { k.adam_step(ap.data(), ag.data(), am.data(), av.data(), ap.size(), astep); });
  add("adam_step reference loop (optim::Adam without use_kernels)", 0,
      [&, astep] { ops::reference_kernels().adam_step(ap.data(), ag.data(), am.data(), av.data(), ap.size(), astep); });

  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // ---- the five convolution passes of one step, side by side ----
  auto ours_unfused = [&] {
    k.conv2d_forward(c1.y.data(), c1.x.data(), c1.w.data(), c1.b.data(), c1.s);
    k.conv2d_backward_weight(c1.dw.data(), c1.db.data(), c1.dy.data(), c1.x.data(), c1.s);
    k.conv2d_forward(c2.y.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    k.conv2d_backward_data(c2.dx.data(), c2.dy.data(), c2.w.data(), c2.s);
    k.conv2d_backward_weight(c2.dw.data(), c2.db.data(), c2.dy.data(), c2.x.data(), c2.s);
  };
  auto ours_fused = [&] {  // the same five passes plus bias, ReLU and pooling, as the model runs them
    k.conv2d_relu_pool_forward(c1.pooled.data(), c1.saved.data(), c1.x.data(), c1.w.data(), c1.b.data(), c1.s);
    k.conv2d_relu_pool_backward(nullptr, c1.dw.data(), c1.db.data(), c1.dpooled.data(), c1.saved.data(), c1.w.data(),
                                c1.s);
    k.conv2d_relu_pool_forward(c2.pooled.data(), c2.saved.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    k.conv2d_relu_pool_backward(c2.dx.data(), c2.dw.data(), c2.db.data(), c2.dpooled.data(), c2.saved.data(),
                                c2.w.data(), c2.s);
  };
  const double flop5 = 2 * m1 + 3 * m2;
#ifdef RINGTRAIN_HAVE_DNNL
  auto dnnl5 = [&] {
    d1.forward(), d1.backward_weight();
    d2.forward(), d2.backward_data(), d2.backward_weight();
  };
  auto [t_ours, t_dnnl] = alternate(ours_unfused, dnnl5);
  std::printf("\nfive conv passes, batch %d, median of 15 alternating runs (CPU time):\n", g_batch);
  std::printf("  ringtrain (%s, unfused)  %8.1f us = %.2f us/sample, %5.1f GFLOP/s, %4.1f%% of peak\n",
              ops::isa_name(k.level), t_ours * 1e6, t_ours * 1e6 / g_batch, flop5 / t_ours * 1e-9,
              flop5 / t_ours * 1e-9 * 100 / g_peak);
  std::printf("  oneDNN                     %8.1f us = %.2f us/sample, %5.1f GFLOP/s, %4.1f%% of peak\n", t_dnnl * 1e6,
              t_dnnl * 1e6 / g_batch, flop5 / t_dnnl * 1e-9, flop5 / t_dnnl * 1e-9 * 100 / g_peak);
  if (k.conv2d_relu_pool_forward) {
    auto [t_fused, t_dnnl2] = alternate(ours_fused, dnnl5);
    std::printf("  ringtrain (%s, fused conv+bias+ReLU+pool, as in the model) %8.1f us = %.2f us/sample "
                "(oneDNN conv only, same run: %.1f us)\n",
                ops::isa_name(k.level), t_fused * 1e6, t_fused * 1e6 / g_batch, t_dnnl2 * 1e6);
  }
  std::printf("  ratio oneDNN / ringtrain (unfused): %.2fx\n", t_dnnl / t_ours);
#else
  auto [t_ours, t_same] = alternate(ours_unfused, ours_unfused);
  (void)t_same;
  std::printf("\nfive conv passes, batch %d: ringtrain %.1f us (%.1f GFLOP/s); oneDNN not built (libdnnl-dev missing)\n",
              g_batch, t_ours * 1e6, flop5 / t_ours * 1e-9);
#endif
  return 0;
}
