#include "ringtrain/core/rng.h"

#include <cmath>
#include <numeric>

namespace ringtrain {

void Rng::reseed(uint64_t seed, uint64_t stream) {
  state_ = 0;
  inc_ = (stream << 1) | 1u;
  next_u32();
  state_ += seed;
  next_u32();
}

uint32_t Rng::next_u32() {
  uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + inc_;
  uint32_t xorshifted = uint32_t(((old >> 18u) ^ old) >> 27u);
  uint32_t rot = uint32_t(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t Rng::below(uint32_t n) {
  uint64_t m = uint64_t(next_u32()) * n;
  uint32_t low = uint32_t(m);
  if (low < n) {
    uint32_t threshold = uint32_t(-n) % n;
    while (low < threshold) {
      m = uint64_t(next_u32()) * n;
      low = uint32_t(m);
    }
  }
  return uint32_t(m >> 32);
}

float Rng::normal() {
  // Box-Muller; u1 in (0, 1] so log is finite.
  float u1 = 1.0f - uniform();
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647692f * u2);
}

std::vector<int64_t> random_permutation(int64_t n, Rng& rng) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = rng.below(uint32_t(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace ringtrain
