// Process CPU time and a measured copy bandwidth: the roofline the memory-bound ops' benchmarks divide by
// (bench_ops's max-pool rows, bench_depthwise).
#pragma once
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

namespace ringtrain::bench {

inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Measured memory bandwidth (GB/s, bytes read + written): the best of 7 copies between two buffers of `bytes`
// each, in process CPU time. The roofline of a memory-bound op whose data is about this size (at the zoo's
// batch 64 most activations are a few MB: L2 or L3 on these CPUs, not DRAM).
inline double copy_bandwidth_gbs(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    const double t0 = process_cpu_seconds();
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    best = std::min(best, process_cpu_seconds() - t0);
    std::swap(a, b);
  }
  return 2.0 * double(bytes) * 1e-9 / best;
}

}  // namespace ringtrain::bench
