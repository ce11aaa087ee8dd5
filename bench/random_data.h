// Deterministic random operands for the kernel benchmarks (bench_ops, bench_depthwise): uniform in [-1, 1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringtrain/core/rng.h"

namespace ringtrain::bench {

inline std::vector<float> random_vec(std::size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

}  // namespace ringtrain::bench
