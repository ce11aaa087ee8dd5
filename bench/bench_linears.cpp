// vit's linear layers pass by pass, one thread (issue 14, acceptance 2: where vit's step time goes). Each of
// in_proj (128 -> 384), out_proj (128 -> 128), mlp.0 (128 -> 512) and mlp.3 (512 -> 128) at batch x 17 token
// rows: the plain forward, backward-data and backward-weight (ops::KernelTable::linear_*), and the split sums
// vit runs so that --tp reproduces one process's bits (linear_forward_chunked for out_proj and mlp.3,
// linear_backward_data_chunked for in_proj (q, k, v: 3 groups) and mlp.0; nn/tp_reduction.h); out_proj's and
// mlp.3's backward-data, plain GEMMs, are timed with their weight gradient (one KernelTable call, 2x the FLOPs). GFLOP/s from
// 2 N I O a pass and % of this core's measured fp32 peak (core/peak.h); medians of --reps timings of 10 calls
// after a warm-up (thread CPU time), data in cache as in a GEMM-bound step. A checksum of each result is
// printed so two builds can be compared for the same bits.
//   bench_linears [--batch 64] [--reps 21] [--isa avx512|avx2|scalar]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "random_data.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/ops/kernels.h"

using namespace ringtrain;

namespace {

struct LinearLayer {
  const char* name;
  int in, out;
  bool chunked_forward;  // row-parallel under --tp: the forward sums in chunks
  int groups;            // column-parallel: the backward-data sums in chunks over this many groups (0: plain)
};

double checksum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 64, reps = 21;
  std::string isa;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_linears: %s needs a value (--batch N, --reps R, --isa L)\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--reps") == 0) {
      reps = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--isa") == 0) {
      isa = argv[i + 1];
    } else {
      std::fprintf(stderr, "bench_linears: unknown option %s (--batch N, --reps R, --isa L)\n", argv[i]);
      return 2;
    }
  }
  if (batch < 1 || reps < 1) {
    std::fprintf(stderr, "bench_linears: --batch and --reps must be positive\n");
    return 2;
  }
  ops::IsaLevel level;
  try {
    level = isa.empty() ? ops::default_isa() : ops::parse_isa(isa);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_linears: %s\n", e.what());
    return 2;
  }
  const ops::KernelTable& k = ops::kernels_for(level);
  const double peak = bench::fp32_peak_gflops_of(level == ops::IsaLevel::Avx512);
  const int rows = batch * 17, chunks = 4;
  std::printf("vit's linears at batch %d (%d token rows), %s, one thread; medians of %d timings of 10 calls; "
              "fp32 peak %.1f GFLOP/s (measured)\n", batch, rows, ops::isa_name(k.level), reps, peak);
  std::printf("%-9s %-26s %9s %8s %7s %16s\n", "layer", "pass", "us", "GFLOP/s", "%peak", "checksum");
  const LinearLayer layers[] = {{"in_proj", 128, 384, false, 3},
                                {"out_proj", 128, 128, true, 0},
                                {"mlp.0", 128, 512, false, 1},
                                {"mlp.3", 512, 128, true, 0}};
  for (const LinearLayer& l : layers) {
    const ops::LinearShape s{rows, l.in, l.out};
    std::vector<float> x = bench::random_vec(std::size_t(rows) * l.in, 1), w = bench::random_vec(std::size_t(l.out) * l.in, 2),
                       b = bench::random_vec(std::size_t(l.out), 3), dy = bench::random_vec(std::size_t(rows) * l.out, 4);
    std::vector<float> y(std::size_t(rows) * l.out), dx(std::size_t(rows) * l.in), dw(w.size()), db(b.size());
    auto run = [&](const char* pass, const std::vector<float>& result, auto call, double flop_factor = 1.0) {
      call();  // warm-up: scratch grown, caches filled
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) {
        const double t0 = bench::thread_cpu_seconds();
        for (int c = 0; c < 10; ++c) call();
        t.push_back((bench::thread_cpu_seconds() - t0) / 10);
      }
      std::sort(t.begin(), t.end());
      const double sec = t[std::size_t(reps) / 2], gflops = flop_factor * 2.0 * s.macs() * 1e-9 / sec;
      std::printf("%-9s %-26s %9.1f %8.1f %6.1f%% %16.6f\n", l.name, pass, sec * 1e6, gflops, 100.0 * gflops / peak,
                  checksum(result));
    };
    run("forward", y, [&] { k.linear_forward(y.data(), x.data(), w.data(), b.data(), s); });
    run("backward-weight (+bias)", dw, [&] { k.linear_backward(nullptr, dw.data(), db.data(), dy.data(), x.data(), w.data(), s); });
    if (!l.groups)  // row-parallel: its backward-data is the plain GEMM, in the same call as the weight's
      run("backward (data + weight)", dx,
          [&] { k.linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), s); }, 2.0);
    if (l.chunked_forward && k.linear_forward_chunked)
      run("forward, split sums", y, [&] { k.linear_forward_chunked(y.data(), x.data(), w.data(), b.data(), s, chunks); });
    if (l.groups && k.linear_backward_data_chunked)
      run("backward-data, split sums", dx,
          [&] { k.linear_backward_data_chunked(dx.data(), dy.data(), w.data(), s, chunks, l.groups); });
  }
  return 0;
}
