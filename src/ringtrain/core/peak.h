// Measured single-core peaks: fp32 FMA (AVX-512 and AVX2 forms) and the BF16 dot product
// (vdpbf16ps). Each loop keeps 12 independent accumulators, more than latency x issue width on any
// current core, so it runs at the FMA units' throughput. Header-only: every benchmark is its own
// executable. Compiled with target attributes, so the benchmarks themselves need no ISA flags.
#pragma once
#include <immintrin.h>

#include <time.h>

#include <algorithm>
#include <cstdint>

namespace ringtrain::bench {

// FLOP executed by each kernel per loop iteration.
constexpr double kFmaAvx512Flop = 12 * 16 * 2;   // 12 vfmadd231ps zmm: 16 lanes x (mul + add)
constexpr double kFmaAvx2Flop = 12 * 8 * 2;      // 12 vfmadd231ps ymm
constexpr double kDpbf16Flop = 12 * 16 * 2 * 2;  // 12 vdpbf16ps zmm: 16 lanes x 2 bf16 pairs x (mul + add)

// Inline assembly: the compiler may neither fuse, drop nor spill the 12 accumulators.
__attribute__((target("avx512f"), noinline)) inline float fma_avx512_loop(int64_t iters) {
  __m512 a0 = _mm512_set1_ps(float(0) * 1e-3f);
  __m512 a1 = _mm512_set1_ps(float(1) * 1e-3f);
  __m512 a2 = _mm512_set1_ps(float(2) * 1e-3f);
  __m512 a3 = _mm512_set1_ps(float(3) * 1e-3f);
  __m512 a4 = _mm512_set1_ps(float(4) * 1e-3f);
  __m512 a5 = _mm512_set1_ps(float(5) * 1e-3f);
  __m512 a6 = _mm512_set1_ps(float(6) * 1e-3f);
  __m512 a7 = _mm512_set1_ps(float(7) * 1e-3f);
  __m512 a8 = _mm512_set1_ps(float(8) * 1e-3f);
  __m512 a9 = _mm512_set1_ps(float(9) * 1e-3f);
  __m512 a10 = _mm512_set1_ps(float(10) * 1e-3f);
  __m512 a11 = _mm512_set1_ps(float(11) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    __asm__ volatile("vfmadd231ps %[x], %[y], %[a0]\n\tvfmadd231ps %[x], %[y], %[a1]\n\tvfmadd231ps %[x], %[y], %[a2]\n\tvfmadd231ps %[x], %[y], %[a3]\n\tvfmadd231ps %[x], %[y], %[a4]\n\tvfmadd231ps %[x], %[y], %[a5]\n\tvfmadd231ps %[x], %[y], %[a6]\n\tvfmadd231ps %[x], %[y], %[a7]\n\tvfmadd231ps %[x], %[y], %[a8]\n\tvfmadd231ps %[x], %[y], %[a9]\n\tvfmadd231ps %[x], %[y], %[a10]\n\tvfmadd231ps %[x], %[y], %[a11]" : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11) : [x] "v"(x), [y] "v"(y));
  return a0[0] + a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0];
}

__attribute__((target("avx2,fma"), noinline)) inline float fma_avx2_loop(int64_t iters) {
  __m256 a0 = _mm256_set1_ps(float(0) * 1e-3f);
  __m256 a1 = _mm256_set1_ps(float(1) * 1e-3f);
  __m256 a2 = _mm256_set1_ps(float(2) * 1e-3f);
  __m256 a3 = _mm256_set1_ps(float(3) * 1e-3f);
  __m256 a4 = _mm256_set1_ps(float(4) * 1e-3f);
  __m256 a5 = _mm256_set1_ps(float(5) * 1e-3f);
  __m256 a6 = _mm256_set1_ps(float(6) * 1e-3f);
  __m256 a7 = _mm256_set1_ps(float(7) * 1e-3f);
  __m256 a8 = _mm256_set1_ps(float(8) * 1e-3f);
  __m256 a9 = _mm256_set1_ps(float(9) * 1e-3f);
  __m256 a10 = _mm256_set1_ps(float(10) * 1e-3f);
  __m256 a11 = _mm256_set1_ps(float(11) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    __asm__ volatile("vfmadd231ps %[x], %[y], %[a0]\n\tvfmadd231ps %[x], %[y], %[a1]\n\tvfmadd231ps %[x], %[y], %[a2]\n\tvfmadd231ps %[x], %[y], %[a3]\n\tvfmadd231ps %[x], %[y], %[a4]\n\tvfmadd231ps %[x], %[y], %[a5]\n\tvfmadd231ps %[x], %[y], %[a6]\n\tvfmadd231ps %[x], %[y], %[a7]\n\tvfmadd231ps %[x], %[y], %[a8]\n\tvfmadd231ps %[x], %[y], %[a9]\n\tvfmadd231ps %[x], %[y], %[a10]\n\tvfmadd231ps %[x], %[y], %[a11]" : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11) : [x] "v"(x), [y] "v"(y));
  return a0[0] + a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0];
}

__attribute__((target("avx512f,avx512bf16"), noinline)) inline float dpbf16_loop(int64_t iters) {
  __m512 a0 = _mm512_set1_ps(float(0) * 1e-3f);
  __m512 a1 = _mm512_set1_ps(float(1) * 1e-3f);
  __m512 a2 = _mm512_set1_ps(float(2) * 1e-3f);
  __m512 a3 = _mm512_set1_ps(float(3) * 1e-3f);
  __m512 a4 = _mm512_set1_ps(float(4) * 1e-3f);
  __m512 a5 = _mm512_set1_ps(float(5) * 1e-3f);
  __m512 a6 = _mm512_set1_ps(float(6) * 1e-3f);
  __m512 a7 = _mm512_set1_ps(float(7) * 1e-3f);
  __m512 a8 = _mm512_set1_ps(float(8) * 1e-3f);
  __m512 a9 = _mm512_set1_ps(float(9) * 1e-3f);
  __m512 a10 = _mm512_set1_ps(float(10) * 1e-3f);
  __m512 a11 = _mm512_set1_ps(float(11) * 1e-3f);
  const __m512 x = _mm512_castsi512_ps(_mm512_set1_epi16(0x3f80)), y = _mm512_castsi512_ps(_mm512_set1_epi16(0x3380));
  for (int64_t it = 0; it < iters; ++it)
    __asm__ volatile("vdpbf16ps %[x], %[y], %[a0]\n\tvdpbf16ps %[x], %[y], %[a1]\n\tvdpbf16ps %[x], %[y], %[a2]\n\tvdpbf16ps %[x], %[y], %[a3]\n\tvdpbf16ps %[x], %[y], %[a4]\n\tvdpbf16ps %[x], %[y], %[a5]\n\tvdpbf16ps %[x], %[y], %[a6]\n\tvdpbf16ps %[x], %[y], %[a7]\n\tvdpbf16ps %[x], %[y], %[a8]\n\tvdpbf16ps %[x], %[y], %[a9]\n\tvdpbf16ps %[x], %[y], %[a10]\n\tvdpbf16ps %[x], %[y], %[a11]" : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11) : [x] "v"(x), [y] "v"(y));
  return a0[0] + a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0];
}

inline bool cpu_has(const char* feature) {
  __builtin_cpu_init();
  if (__builtin_strcmp(feature, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
  if (__builtin_strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (__builtin_strcmp(feature, "avx512bf16") == 0) return __builtin_cpu_supports("avx512bf16");
  return false;
}

// CPU time of the calling thread, in seconds: on a shared machine, time the thread actually ran
// (Google Benchmark's default "CPU" time is the same kind of clock, so % of peak compares like with like).
inline double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

inline double wall_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best GFLOP/s (per CPU second, or per wall second with clock = wall_seconds) of `tries` timed runs
// of about `seconds` each.
template <class Loop>
double measure_gflops(Loop loop, double flop_per_iter, double seconds = 0.05, int tries = 5,
                      double (*clock)() = thread_cpu_seconds) {
  int64_t iters = 1 << 16;
  double best = 0.0;
  for (int t = 0; t < tries + 1; ++t) {
    const double t0 = clock();
    volatile float sink = loop(iters);
    (void)sink;
    const double s = clock() - t0;
    if (t > 0) best = std::max(best, double(iters) * flop_per_iter / s * 1e-9);  // first run: warm-up, sizing
    iters = std::max<int64_t>(1 << 12, int64_t(double(iters) * seconds / std::max(s, 1e-6)));
  }
  return best;
}

// The fp32 peak of the kernels of one vector width (GFLOP/s): avx512 = the zmm loop, else the ymm loop; 0 where
// the CPU lacks it. A run forced to a level below the CPU's best (`--isa avx2` on an AVX-512 CPU) is held to the
// ymm rate, the most its kernels can reach.
inline double fp32_peak_gflops_of(bool avx512) {
  if (avx512) return cpu_has("avx512f") ? measure_gflops(fma_avx512_loop, kFmaAvx512Flop) : 0.0;
  return cpu_has("avx2") ? measure_gflops(fma_avx2_loop, kFmaAvx2Flop) : 0.0;
}

// The fp32 peak the kernels can reach: AVX-512 if the CPU has it, else AVX2+FMA.
inline double fp32_peak_gflops() { return fp32_peak_gflops_of(cpu_has("avx512f")); }

}  // namespace ringtrain::bench
