// nn/partials.h: the per-thread partial gradients' sum. Split into parts (one a thread, as Model::backward
// does for large layers) it must give the whole sum's bits: each element is still added in slice order.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/nn/partials.h"

namespace ringtrain::nn {
namespace {

// Fills every slot of `p` (slices 0..T-1) with random values; returns the slice-0 tensors (the finals).
std::vector<std::vector<float>> fill(GradPartials& p, int T, const std::vector<std::size_t>& sizes, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<float>> finals;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    finals.emplace_back(sizes[i]);
    for (int t = 0; t < T; ++t) {
      float* slot = p.slot(t, int(i), finals.back().data());
      // Magnitudes 1e-4 .. 1e4, so the order of the additions shows in the bits.
      for (std::size_t j = 0; j < sizes[i]; ++j) slot[j] = rng.uniform(-1.0f, 1.0f) * float(1 << rng.below(28)) * 1e-4f;
    }
  }
  return finals;
}

TEST(GradPartials, ASumSplitIntoPartsHasTheWholeSumsBits) {
  const std::vector<std::size_t> sizes{1, 15, 16, 17, 1000, 4099};  // around the 16-float lines, and tiny ones
  for (int T : {2, 3, 4}) {
    for (int parts : {1, 2, 3, 5, 64}) {
      GradPartials whole, split;
      whole.reserve(T, sizes);
      split.reserve(T, sizes);
      auto a = fill(whole, T, sizes, 7), b = fill(split, T, sizes, 7);
      std::vector<float*> fa, fb;
      for (auto& v : a) fa.push_back(v.data());
      for (auto& v : b) fb.push_back(v.data());
      whole.reduce(fa);
      for (int part = parts; part-- > 0;) split.reduce(fb, part, parts);  // any order of the parts
      for (std::size_t i = 0; i < sizes.size(); ++i)
        ASSERT_EQ(0, std::memcmp(a[i].data(), b[i].data(), sizes[i] * sizeof(float)))
            << "T " << T << " parts " << parts << " tensor " << i;
    }
  }
}

TEST(GradPartials, EveryElementIsSummedOnceWhateverTheParts) {
  const std::vector<std::size_t> sizes{37, 513};
  GradPartials p;
  p.reserve(3, sizes);
  std::vector<std::vector<float>> finals{std::vector<float>(37), std::vector<float>(513)};
  for (std::size_t i = 0; i < sizes.size(); ++i)
    for (int t = 0; t < 3; ++t) {
      float* slot = p.slot(t, int(i), finals[i].data());
      for (std::size_t j = 0; j < sizes[i]; ++j) slot[j] = float(t + 1);  // 1 + 2 + 3
    }
  std::vector<float*> f{finals[0].data(), finals[1].data()};
  for (int part = 0; part < 7; ++part) p.reduce(f, part, 7);
  for (const auto& v : finals)
    for (float x : v) ASSERT_EQ(x, 6.0f);
}

}  // namespace
}  // namespace ringtrain::nn
