// Single-core peaks of this CPU, measured (bench/peak.h): fp32 FMA with 512- and 256-bit vectors, the BF16
// dot product (vdpbf16ps) and, where the CPU and the OS allow it, AMX's tile product (tdpbf16ps). The % of
// peak figures in docs/BENCHMARKS.md divide by these.
//   bench_peak            (pin it for a clean figure: taskset -c 1 bench_peak)
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "ringtrain/core/peak.h"
#include "ringtrain/ops/cpu/amx.h"

using namespace ringtrain::bench;

namespace {

// AMX: four independent tdpbf16ps a loop (tmm0-3 += a 16 x 32 bf16 tile times a 32 x 16 one: 8192
// multiply-adds each), operands held in tmm4-7. Call only where amx_bf16_usable().
constexpr double kAmxFlop = 4 * 16 * 16 * 32 * 2;
__attribute__((target("amx-tile,amx-bf16"), noinline)) float amx_loop(int64_t iters) {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.colsb[t] = 64;
  _tile_loadconfig(&config);
  alignas(64) static uint16_t operand[16 * 32];
  std::fill(operand, operand + 16 * 32, uint16_t(0x3380));  // bf16 6e-8: the sums stay finite
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0];
}

}  // namespace

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
  if (ringtrain::ops::cpu::amx_bf16_usable())
    std::printf("  BF16 tiles, AMX   (tdpbf16ps):       %7.1f GFLOP/s\n", measure_gflops(amx_loop, kAmxFlop));
  else
    std::printf("  BF16 tiles: this CPU (or its OS) has no AMX-BF16\n");
  return 0;
}
