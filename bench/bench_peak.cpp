// Single-core peaks of this CPU, measured (bench/peak.h): fp32 FMA with 512- and 256-bit vectors and
// the BF16 dot product (vdpbf16ps). The % of peak figures in docs/BENCHMARKS.md divide by these.
//   bench_peak            (pin it for a clean figure: taskset -c 1 bench_peak)
#include <algorithm>
#include <cstdio>

#include "ringtrain/core/peak.h"

using namespace ringtrain::bench;

int main() {
  std::printf("single-core peaks (best of 5 runs of ~50 ms of thread CPU time, 12 independent accumulators):\n");
  if (cpu_has("avx512f"))
    std::printf("  fp32 FMA, AVX-512 (vfmadd231ps zmm): %7.1f GFLOP/s   (wall clock: %.1f)\n",
                measure_gflops(fma_avx512_loop, kFmaAvx512Flop),
                measure_gflops(fma_avx512_loop, kFmaAvx512Flop, 0.05, 5, wall_seconds));
  if (cpu_has("avx2"))
    std::printf("  fp32 FMA, AVX2    (vfmadd231ps ymm): %7.1f GFLOP/s\n", measure_gflops(fma_avx2_loop, kFmaAvx2Flop));
  if (cpu_has("avx512bf16"))
    std::printf("  BF16 dot, AVX-512 (vdpbf16ps zmm):   %7.1f GFLOP/s\n", measure_gflops(dpbf16_loop, kDpbf16Flop));
  else
    std::printf("  BF16 dot: this CPU has no AVX512_BF16\n");
  return 0;
}
