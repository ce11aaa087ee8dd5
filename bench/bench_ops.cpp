// Every op pass of a LeNet-5 step at batch 256 on one thread (Google Benchmark): GFLOP/s from the op's
// own multiply-add count and % of this core's measured fp32 peak (bench/peak.h), with oneDNN's and LIBXSMM's
// figures beside each convolution pass (each rival in its own preferred layouts, its primitives or layers and
// data prepared outside the timing; LIBXSMM 1.17 fuses no bias, so its LeNet passes leave the bias out, and
// it has no grouped convolutions: "LIBXSMM: no kernel for ..."). Validates every kernel against the reference
// (and each rival against ringtrain) first. A rival is built only where its Debian package is found.
//
//   bench_ops [--batch 256] [Google Benchmark flags, e.g. --benchmark_filter=conv2]
//   RINGTRAIN_ISA=avx2 bench_ops     (another kernel level; default: the best this CPU runs)
//   bench_ops --precision bf16       (the kernels of another compute precision, ops/lowp.h; default fp32)
//   bench_ops --zoo-batch 64 --benchmark_filter=zoo   (the zoo's conv shapes: resnet18, mobilenet_v2, ViT;
//                                       resnet18's stem max-pool in GB/s and % of a copy's bandwidth)
//   bench_ops --zoo-bf16 [--reps 15] [--zoo-filter resnet18]   (only the zoo's conv passes: fp32, bf16 and bf16's rounding fallback
//                                       side by side, medians of alternating timings, then exit)
//   bench_ops --zoo-rivals [--reps 15] [--zoo-filter resnet18]   (only the zoo's conv passes: ringtrain's fp32
//                                       kernels at the default level or RINGTRAIN_ISA's, oneDNN and LIBXSMM side by
//                                       side, validated, medians of round-robin timings as a markdown table, then exit.
//                                       The rivals pick their own ISA: LIBXSMM_TARGET=hsw and ONEDNN_MAX_CPU_ISA=AVX2
//                                       hold them to AVX2)
//
// Ends with the issue-3 comparison: the five convolution passes of a step (conv1 forward and
// backward-weight, conv2 forward, backward-data and backward-weight), ringtrain vs oneDNN and LIBXSMM, as
// the median of 15 round-robin timings of each side. All times are CPU time (Google Benchmark's "CPU"
// column; the peak too), which on a quiet machine equals wall time and on a shared one excludes
// the time other processes took.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <time.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
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
#ifdef RINGTRAIN_HAVE_XSMM
#include "ringtrain/ops/xsmm/conv_xsmm.h"
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

// The median of `reps` round-robin timings of each of fns (seconds per call), after one warm-up call each, in
// process CPU time (so a shared machine's other load does not count, and any helper thread a rival starts
// does). Round robin: every side sees the same minutes of the machine.
std::vector<double> round_robin(const std::vector<std::function<void()>>& fns, int reps = 15) {
  std::vector<std::vector<double>> t(fns.size());
  for (const auto& f : fns) f();
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < fns.size(); ++i) {
      const double t0 = process_cpu_seconds();
      fns[i]();
      t[i].push_back(process_cpu_seconds() - t0);
    }
  std::vector<double> med;
  for (auto& ti : t) {
    std::sort(ti.begin(), ti.end());
    med.push_back(ti[reps / 2]);
  }
  return med;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) scale = std::max(scale, double(std::fabs(b[i])));
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / scale);
  return worst;
}

// One rival library's layer for one conv shape, its data set from a ConvData, its passes behind std::function
// so that every mode treats oneDNN and LIBXSMM (each built only where its package was found) alike.
struct Rival {
  const char* library = "";     // "oneDNN" or "LIBXSMM"
  std::string implementation;   // what runs, in the library's words
  std::string no_kernel;        // why not, where the library has no kernel for the shape (or is not built)
  bool built = true;            // false where this build lacks the library (its Debian package was not found)
  bool bias = false;            // whether its forward adds the bias and its backward-weight makes dbias
  std::function<void()> pass[3];  // forward, backward_data, backward_weight
  // Runs the three passes and converts their results to the plain layouts: y, dx, dw.
  std::function<void(std::vector<float>&, std::vector<float>&, std::vector<float>&)> results;
  explicit operator bool() const { return bool(pass[0]); }
};

const char* const kPassNames[3] = {"forward", "backward_data", "backward_weight"};

// A rival from make() (a shared_ptr to a conv layer with the dnnl_rival / xsmm_rival interface), or one that
// says why it has no kernel: its constructor's exception (ringtrain::Error, or oneDNN's dnnl::error).
template <typename Make>
Rival make_rival(const char* library, bool bias, Make make, const ConvData& c) {
  Rival r;
  r.library = library;
  r.bias = bias;
  try {
    auto conv = make();
    conv->set_input(c.x.data());
    conv->set_weight(c.w.data(), c.b.data());
    conv->set_dout(c.dy.data());
    r.implementation = conv->implementation();
    r.pass[0] = [conv] { conv->forward(); };
    r.pass[1] = [conv] { conv->backward_data(); };
    r.pass[2] = [conv] { conv->backward_weight(); };
    r.results = [conv, K = c.s.K](std::vector<float>& y, std::vector<float>& dx, std::vector<float>& dw) {
      std::vector<float> db(K);  // dbias where the rival makes one; not compared (ringtrain's tests cover it)
      conv->forward(), conv->backward_data(), conv->backward_weight();
      conv->get_output(y.data()), conv->get_dinp(dx.data()), conv->get_dweight(dw.data(), db.data());
    };
  } catch (const std::exception& e) {  // ringtrain::Error says "LIBXSMM: no kernel for ...", dnnl::error less
    const std::string what = e.what();
    r.no_kernel = what.rfind(library, 0) == 0 ? what : std::string(library) + ": no kernel: " + what;
  }
  return r;
}

// A rival this build lacks (its Debian package was not found at configure time).
[[maybe_unused]] Rival not_built(const char* library, const char* package) {
  Rival r;
  r.library = library;
  r.no_kernel = std::string(library) + " not built (" + package + " missing)";
  r.built = false;
  return r;
}

// The rivals for c's shape, always oneDNN then LIBXSMM (a library not built says so in no_kernel). bias: give
// oneDNN the bias (LeNet's convs); LIBXSMM 1.17 fuses none, so it never has one.
std::vector<Rival> rivals_for(const ConvData& c, bool bias) {
  std::vector<Rival> r;
#ifdef RINGTRAIN_HAVE_DNNL
  r.push_back(make_rival("oneDNN", bias, [&] { return std::make_shared<ops::dnnl_rival::Conv2d>(c.s, bias); }, c));
#else
  r.push_back(not_built("oneDNN", "libdnnl-dev"));
#endif
#ifdef RINGTRAIN_HAVE_XSMM
  r.push_back(make_rival("LIBXSMM", false, [&] { return std::make_shared<ops::xsmm_rival::Conv2d>(c.s); }, c));
#else
  r.push_back(not_built("LIBXSMM", "libxsmm-dev"));
#endif
  return r;
}

// Max |rival - ringtrain| / max |ringtrain| of the three passes, ringtrain's kernels k run on c's data (with
// c's bias where the rival has one). Overwrites c's outputs.
std::array<double, 3> rival_diffs(const Rival& r, ConvData& c, const ops::KernelTable& k) {
  std::vector<float> y(c.y.size()), dx(c.x.size()), dw(c.w.size());
  r.results(y, dx, dw);
  k.conv2d_forward(c.y.data(), c.x.data(), c.w.data(), r.bias ? c.b.data() : nullptr, c.s);
  k.conv2d_backward_data(c.dx.data(), c.dy.data(), c.w.data(), c.s);
  k.conv2d_backward_weight(c.dw.data(), r.bias ? c.db.data() : nullptr, c.dy.data(), c.x.data(), c.s);
  return {max_rel_diff(y, c.y), max_rel_diff(dx, c.dx), max_rel_diff(dw, c.dw)};
}

// Builds the rivals for one shape and prints, for each, its validation line or the line saying it has no kernel.
std::vector<Rival> validated_rivals(const char* name, ConvData& c, const ops::KernelTable& k, bool bias) {
  std::vector<Rival> rivals = rivals_for(c, bias);
  for (const Rival& r : rivals) {
    if (!r) {
      std::printf("%s [%s]\n", r.no_kernel.c_str(), name);
      continue;
    }
    const auto d = rival_diffs(r, c, k);
    std::printf("validation %s vs ringtrain (%s%s): forward %.1e, backward-data %.1e, backward-weight %.1e\n",
                r.library, name, r.bias ? "" : ", no bias", d[0], d[1], d[2]);
  }
  return rivals;
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

// Each rival's implementation names, each distinct one once with the shapes it runs for.
void print_implementations(const std::vector<std::pair<const char*, std::vector<Rival>>>& shapes) {
  for (std::size_t i = 0; !shapes.empty() && i < shapes[0].second.size(); ++i) {
    std::map<std::string, std::string> where;  // implementation -> the shapes it runs for
    for (const auto& [name, rivals] : shapes) {
      if (!rivals[i]) continue;
      std::string& names = where[rivals[i].implementation];
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    for (const auto& [impl, names] : where)
      std::printf("%s: %s\n  (%s)\n", shapes[0].second[i].library, impl.c_str(), names.c_str());
  }
}

// The zoo's conv passes, ringtrain's fp32 kernels (the default ISA level, or RINGTRAIN_ISA's) against oneDNN and
// LIBXSMM, each rival in its preferred layouts with no bias (as the zoo's ringtrain passes), validated, then timed
// round-robin `reps` times in one run (process CPU time, medians): a markdown table, "no kernel" where a rival
// has none. The rivals choose their ISA themselves (ONEDNN_MAX_CPU_ISA, LIBXSMM_TARGET).
int zoo_rivals_side_by_side(int reps, const char* filter) {
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  std::printf("zoo conv passes, batch %d, one thread; ringtrain %s fp32 vs oneDNN and LIBXSMM (no bias, each in\n"
              "its preferred layouts, converted outside the timing); medians of %d round-robin timings (process CPU "
              "time)\n",
              g_zoo_batch, ops::isa_name(k.level), reps);
#ifdef RINGTRAIN_HAVE_DNNL
  std::printf("oneDNN ISA: %s\n", ops::dnnl_rival::effective_isa().c_str());
#endif
#ifdef RINGTRAIN_HAVE_XSMM
  std::printf("LIBXSMM target: %s\n", ops::xsmm_rival::target_arch().c_str());
#endif
  std::vector<std::unique_ptr<ConvData>> data;
  std::vector<std::pair<const char*, std::vector<Rival>>> shapes;
  for (const ZooShape& z : zoo_shapes()) {
    if (filter && !std::strstr(z.name, filter)) continue;
    data.push_back(std::make_unique<ConvData>(z.s, false));
    shapes.emplace_back(z.name, validated_rivals(z.name, *data.back(), k, false));
  }
  print_implementations(shapes);

  std::printf("\n| shape | pass | ours us | oneDNN us | LIBXSMM us | oneDNN/ours | LIBXSMM/ours |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  double ours_sum[2] = {0, 0}, rival_sum[2] = {0, 0};  // per rival, over the rows it ran
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    ConvData& c = *data[i];
    const std::vector<Rival>& rivals = shapes[i].second;
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<std::function<void()>> fns = {[&, pass] {
        if (pass == 0) k.conv2d_forward(c.y.data(), c.x.data(), c.w.data(), nullptr, c.s);
        if (pass == 1) k.conv2d_backward_data(c.dx.data(), c.dy.data(), c.w.data(), c.s);
        if (pass == 2) k.conv2d_backward_weight(c.dw.data(), nullptr, c.dy.data(), c.x.data(), c.s);
      }};
      for (const Rival& r : rivals)
        if (r) fns.push_back(r.pass[pass]);
      const std::vector<double> med = round_robin(fns, reps);
      std::string times, ratios;
      char buf[64];
      for (std::size_t j = 0, m = 1; j < rivals.size(); ++j) {
        if (!rivals[j]) {
          times += rivals[j].built ? " no kernel |" : " not built |", ratios += " - |";
          continue;
        }
        std::snprintf(buf, sizeof buf, " %.1f |", med[m] * 1e6), times += buf;
        std::snprintf(buf, sizeof buf, " %.2f |", med[m] / med[0]), ratios += buf;
        ours_sum[j] += med[0], rival_sum[j] += med[m];
        ++m;
      }
      std::printf("| %s | %s | %.1f |%s%s\n", shapes[i].first, kPassNames[pass], med[0] * 1e6, times.c_str(),
                  ratios.c_str());
    }
  }
  std::printf("\n");
  for (int j = 0; j < 2 && !shapes.empty(); ++j)
    if (rival_sum[j] > 0) {
      const char* lib = shapes[0].second[j].library;
      std::printf("%s, sums over the rows it ran: ours %.1f us, %s %.1f us, %s/ours %.2f\n", lib, ours_sum[j] * 1e6,
                  lib, rival_sum[j] * 1e6, lib, rival_sum[j] / ours_sum[j]);
    }
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
    if (std::strcmp(argv[i], "--zoo-bf16") == 0 || std::strcmp(argv[i], "--zoo-rivals") == 0) {
      int reps = 15;
      const char* filter = nullptr;
      for (int j = 1; j + 1 < argc; ++j) {
        if (std::strcmp(argv[j], "--reps") == 0) reps = std::max(1, std::atoi(argv[j + 1]));
        if (std::strcmp(argv[j], "--zoo-filter") == 0) filter = argv[j + 1];
      }
      return std::strcmp(argv[i], "--zoo-bf16") == 0 ? zoo_bf16_side_by_side(reps, filter)
                                                     : zoo_rivals_side_by_side(reps, filter);
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
                                  c1.x.data(), c1.w.data(), c1.s);
    });
    add("conv2+relu+pool/forward (fused)", m2, [&] {
      k.conv2d_relu_pool_forward(c2.pooled.data(), c2.saved.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    });
    add("conv2+relu+pool/backward_data+weight (fused)", 2 * m2, [&] {
      k.conv2d_relu_pool_backward(c2.dx.data(), c2.dw.data(), c2.db.data(), c2.dpooled.data(), c2.saved.data(),
                                  c2.x.data(), c2.w.data(), c2.s);
    });
  }
  // ---- the rivals' LeNet passes (oneDNN with the bias, LIBXSMM without: it fuses none), validated first ----
  static const std::vector<Rival> r1 = validated_rivals("conv1", c1, k, true);
  static const std::vector<Rival> r2 = validated_rivals("conv2", c2, k, true);
  for (std::size_t i = 0; i < r1.size(); ++i) {
    const std::string lib = r1[i].library;
    if (r1[i]) {
      std::printf("%s %s\n  (conv1: %s)\n", lib.c_str(), r2[i] ? r2[i].implementation.c_str() : "-",
                  r1[i].implementation.c_str());
      add(lib + " conv1/forward", m1, r1[i].pass[0]);
      add(lib + " conv1/backward_weight", m1, r1[i].pass[2]);
    }
    if (r2[i]) {
      add(lib + " conv2/forward", m2, r2[i].pass[0]);
      add(lib + " conv2/backward_data", m2, r2[i].pass[1]);
      add(lib + " conv2/backward_weight", m2, r2[i].pass[2]);
    }
  }

  // ---- the zoo's convolutions (batch g_zoo_batch): the three passes, the rivals beside where they have kernels ----
  static std::vector<std::unique_ptr<ConvData>> zoo;
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
    // No bias for the rivals either, as ringtrain's zoo passes above.
    for (const Rival& r : validated_rivals(z.name, *c, k, false))
      for (int pass = 0; r && pass < 3; ++pass)
        add(std::string(r.library) + " " + name + "/" + kPassNames[pass], f, r.pass[pass]);
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
    k.conv2d_relu_pool_backward(nullptr, c1.dw.data(), c1.db.data(), c1.dpooled.data(), c1.saved.data(), c1.x.data(),
                                c1.w.data(), c1.s);
    k.conv2d_relu_pool_forward(c2.pooled.data(), c2.saved.data(), c2.x.data(), c2.w.data(), c2.b.data(), c2.s);
    k.conv2d_relu_pool_backward(c2.dx.data(), c2.dw.data(), c2.db.data(), c2.dpooled.data(), c2.saved.data(),
                                c2.x.data(), c2.w.data(), c2.s);
  };
  const double flop5 = 2 * m1 + 3 * m2;
  // The rivals that have all five passes, each as one call (LIBXSMM without the bias: it fuses none).
  std::vector<std::pair<std::string, std::function<void()>>> rivals5;
  for (std::size_t i = 0; i < r1.size(); ++i)
    if (r1[i] && r2[i])
      rivals5.emplace_back(std::string(r1[i].library) + (r1[i].bias ? "" : " (no bias)"), [&r = r1, &q = r2, i] {
        r[i].pass[0](), r[i].pass[2]();
        q[i].pass[0](), q[i].pass[1](), q[i].pass[2]();
      });
  auto timed_with_rivals = [&](const std::function<void()>& ours) {
    std::vector<std::function<void()>> fns = {ours};
    for (const auto& r : rivals5) fns.push_back(r.second);
    return round_robin(fns);
  };
  const std::vector<double> t = timed_with_rivals(ours_unfused);
  auto line = [&](const std::string& who, double s) {
    std::printf("  %-28s %8.1f us = %.2f us/sample, %5.1f GFLOP/s, %4.1f%% of peak\n", who.c_str(), s * 1e6,
                s * 1e6 / g_batch, flop5 / s * 1e-9, flop5 / s * 1e-9 * 100 / g_peak);
  };
  std::printf("\nfive conv passes, batch %d, median of 15 round-robin runs (CPU time):\n", g_batch);
  line(std::string("ringtrain (") + ops::isa_name(k.level) + ", unfused)", t[0]);
  for (std::size_t i = 0; i < rivals5.size(); ++i) line(rivals5[i].first, t[i + 1]);
  if (k.conv2d_relu_pool_forward) {
    const std::vector<double> tf = timed_with_rivals(ours_fused);
    std::string same_run;
    for (std::size_t i = 0; i < rivals5.size(); ++i)
      same_run += (i ? ", " : "; conv only, same run: ") + rivals5[i].first + " " +
                  std::to_string(int(tf[i + 1] * 1e6 + 0.5)) + " us";
    std::printf("  ringtrain (%s, fused conv+bias+ReLU+pool, as in the model) %8.1f us = %.2f us/sample%s\n",
                ops::isa_name(k.level), tf[0] * 1e6, tf[0] * 1e6 / g_batch, same_run.c_str());
  }
  for (std::size_t i = 0; i < rivals5.size(); ++i)
    std::printf("  ratio %s / ringtrain (unfused): %.2fx\n", rivals5[i].first.c_str(), t[i + 1] / t[0]);
  if (rivals5.empty()) std::printf("  (no rival built or none with all five passes: libdnnl-dev, libxsmm-dev)\n");
  return 0;
}
