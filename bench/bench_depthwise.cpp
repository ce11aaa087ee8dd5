// A zoo model's depthwise convolutions against the memory roofline (issue 14, acceptance 2: mobilenet_v2's
// depthwise layers at >= 50% of the measured memory bandwidth). Depthwise convs do 9 multiply-adds per output
// element, so their speed is the memory traffic's: every layer of the model (its own shapes, from
// nn::Conv2d::shape) is timed pass by pass, one thread, median of --reps timings after a warm-up (process
// CPU time); its traffic is the least a pass must move (each operand read or written once: forward x, w, y;
// backward-data dy, w, dx; backward-weight x, dy, dw); the roofline is a memcpy of the same traffic measured
// just before (bench/bandwidth.h: at batch 64 these layers live in L2 or L3, not DRAM).
//   bench_depthwise [--model mobilenet_v2] [--batch 64] [--reps 11]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "random_data.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"

using namespace ringtrain;

namespace {

struct Pass {
  const char* name;
  double bytes;  // the least traffic: each operand read or written once
};

}  // namespace

int main(int argc, char** argv) {
  std::string model = "mobilenet_v2";
  int batch = 64, reps = 11;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "bench_depthwise: %s needs a value (--model M, --batch N, --reps R)\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--model") == 0) {
      model = argv[i + 1];
    } else if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--reps") == 0) {
      reps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_depthwise: unknown option %s (--model M, --batch N, --reps R)\n", argv[i]);
      return 2;
    }
  }
  if (batch < 1 || reps < 1) {
    std::fprintf(stderr, "bench_depthwise: --batch and --reps must be positive\n");
    return 2;
  }
  std::unique_ptr<nn::Model> m;
  try {
    m = nn::make_model(model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_depthwise: %s\n", e.what());
    return 2;
  }
  const ops::KernelTable& k = ops::kernels_for(ops::default_isa());
  std::printf("%s's depthwise convolutions, batch %d, %s, one thread; medians of %d timings (process CPU time)\n",
              model.c_str(), batch, ops::isa_name(k.level), reps);
  std::printf("%-28s %-15s %9s %9s %8s %8s %8s\n", "layer (C x H x W, stride)", "pass", "MB", "us", "GB/s", "copy", "%copy");
  double sum_bytes = 0, sum_seconds = 0, sum_copy_seconds = 0;
  for (const auto& layer : m->layers()) {
    const auto* conv = dynamic_cast<const nn::Conv2d*>(layer.get());
    if (!conv) continue;
    const ops::Conv2dShape s = conv->shape(batch);
    if (s.groups != s.C || s.groups == 1) continue;
    const std::size_t nx = std::size_t(s.N) * s.C * s.H * s.W, ny = std::size_t(s.N) * s.K * s.P() * s.Q(),
                      nw = std::size_t(s.K) * s.Cg() * s.R * s.S;
    std::vector<float> x = bench::random_vec(nx, 1), w = bench::random_vec(nw, 2), dy = bench::random_vec(ny, 3);
    std::vector<float> y(ny), dx(nx), dw(nw);
    const Pass passes[3] = {{"forward", 4.0 * double(nx + nw + ny)},
                            {"backward_data", 4.0 * double(ny + nw + nx)},
                            {"backward_weight", 4.0 * double(nx + ny + nw)}};
    char label[64];
    std::snprintf(label, sizeof label, "%s (%dx%dx%d s%d)", layer->name().c_str(), s.C, s.H, s.W, s.stride);
    for (int p = 0; p < 3; ++p) {
      auto call = [&] {
        if (p == 0) k.conv2d_forward(y.data(), x.data(), w.data(), nullptr, s);
        if (p == 1) k.conv2d_backward_data(dx.data(), dy.data(), w.data(), s);
        if (p == 2) k.conv2d_backward_weight(dw.data(), nullptr, dy.data(), x.data(), s);
      };
      call();  // warm-up: scratch grown, caches filled
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) {
        const double t0 = bench::process_cpu_seconds();
        call();
        t.push_back(bench::process_cpu_seconds() - t0);
      }
      std::sort(t.begin(), t.end());
      const double sec = t[std::size_t(reps) / 2], bytes = passes[p].bytes;
      const double copy = bench::copy_bandwidth_gbs(std::size_t(bytes / 2));  // reads bytes/2, writes bytes/2
      const double gbs = bytes * 1e-9 / sec;
      std::printf("%-28s %-15s %9.2f %9.1f %8.1f %8.1f %7.1f%%\n", label, passes[p].name, bytes * 1e-6, sec * 1e6, gbs,
                  copy, 100.0 * gbs / copy);
      sum_bytes += bytes, sum_seconds += sec, sum_copy_seconds += bytes * 1e-9 / copy;
    }
  }
  if (sum_seconds == 0) {
    std::fprintf(stderr, "bench_depthwise: %s has no depthwise convolutions\n", model.c_str());
    return 1;
  }
  std::printf("all depthwise passes of one step: %.2f MB in %.1f us = %.1f GB/s; a copy of the same traffic %.1f us: "
              "%.1f%% of the roofline\n",
              sum_bytes * 1e-6, sum_seconds * 1e6, sum_bytes * 1e-9 / sum_seconds, sum_copy_seconds * 1e6,
              100.0 * sum_copy_seconds / sum_seconds);
  return 0;
}
