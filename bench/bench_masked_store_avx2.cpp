// What a masked store costs at level avx2 (src/ringtrain/ops/cpu/simd_avx2.h, VecAvx2::store_mask): a plain
// 8-float store, vmaskmovps (_mm256_maskstore_ps, the wrapper's store before 2026-12-07 and still its path for
// masks that are not a prefix), and the wrapper's store of a prefix mask (4-, 2- and 1-float stores), each as
// a loop of 4 independent stores into an L1-resident buffer. Prints ns a store, the best of 7 runs (thread CPU
// time). Built with the AVX2 flags (bench/CMakeLists.txt); refuses to run on a CPU without AVX2.
//   bench_masked_store_avx2 [--lanes 7]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ringtrain/ops/cpu/simd_avx2.h"

namespace {

using V = ringtrain::ops::cpu::VecAvx2;

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

alignas(64) float buffer[2048 + 32];

// ns a store of `store(p, v)` over the buffer, 4 independent stores an iteration, best of 7 runs.
template <class Store>
double ns_a_store(Store store) {
  const V::R v = V::set1(1.5f);
  constexpr int kSweeps = 4000, kStores = 2048 / 8;
  double best = 1e30;
  for (int run = 0; run < 7; ++run) {
    const double t0 = thread_seconds();
    for (int s = 0; s < kSweeps; ++s)
      for (int i = 0; i < 2048; i += 32) {
        store(buffer + i, v);
        store(buffer + i + 8, v);
        store(buffer + i + 16, v);
        store(buffer + i + 24, v);
        asm volatile("" ::: "memory");  // every sweep's stores happen (no dead-store elimination)
      }
    best = std::min(best, thread_seconds() - t0);
  }
  return best * 1e9 / (double(kSweeps) * kStores);
}

}  // namespace

int main(int argc, char** argv) {
  int lanes = 7;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--lanes") == 0 && i + 1 < argc) {
      lanes = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_masked_store_avx2: unknown option %s (--lanes N, 1..8)\n", argv[i]);
      return 2;
    }
  }
  if (lanes < 1 || lanes > V::L) {
    std::fprintf(stderr, "bench_masked_store_avx2: --lanes must be 1..8\n");
    return 2;
  }
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "bench_masked_store_avx2: this CPU has no AVX2\n");
    return 1;
  }
  const V::M m = V::mask(lanes);
  const double plain = ns_a_store([](float* p, V::R v) { V::store(p, v); });
  const double vmaskmov = ns_a_store([m](float* p, V::R v) { _mm256_maskstore_ps(p, m, v); });
  const double wrapper = ns_a_store([m](float* p, V::R v) { V::store_mask(p, v, m); });
  std::printf("stores of the first %d of 8 lanes, ns a store (best of 7, 4 independent stores a loop):\n", lanes);
  std::printf("  plain 8-float store      %6.3f\n", plain);
  std::printf("  vmaskmovps               %6.3f\n", vmaskmov);
  std::printf("  VecAvx2::store_mask      %6.3f  (vmaskmovps / this: %.1fx)\n", wrapper, vmaskmov / wrapper);
  return 0;
}
