// Deterministic random numbers: a small counter-free PCG32 generator, so that the same seed gives
// the same stream on every platform and compiler (std:: distributions are not portable).
#pragma once
#include <cstdint>
#include <vector>

namespace ringtrain {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0x853c49e6748fea9bULL) { reseed(seed, stream); }
  void reseed(uint64_t seed, uint64_t stream = 0x853c49e6748fea9bULL);

  uint32_t next_u32();
  uint64_t next_u64() { return (uint64_t(next_u32()) << 32) | next_u32(); }
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float uniform() { return float(next_u32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), unbiased (Lemire's rejection).
  uint32_t below(uint32_t n);
  // Standard normal (Box-Muller).
  float normal();

  // The full generator state, for checkpoints.
  uint64_t state() const { return state_; }
  uint64_t increment() const { return inc_; }
  void set_state(uint64_t state, uint64_t inc) { state_ = state; inc_ = inc; }

 private:
  uint64_t state_ = 0;
  uint64_t inc_ = 0;
};

// SplitMix64's finaliser: a well-mixed 64-bit hash, for deriving independent seeds from (seed, index).
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A permutation of 0..n-1 (Fisher-Yates) drawn from rng.
std::vector<int64_t> random_permutation(int64_t n, Rng& rng);

}  // namespace ringtrain
