// AlignedBuffer (core/aligned.h): zeroed and 64-byte aligned at every size, every byte writable.
#include <gtest/gtest.h>

#include <cstdint>

#include "ringtrain/core/aligned.h"

namespace ringtrain {
namespace {

bool all_zero(const uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

TEST(AlignedBuffer, ZeroedAndAlignedAtEverySize) {
  constexpr std::size_t kMiB = std::size_t(1) << 20;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(63), std::size_t(4097), 4 * kMiB - 1, 4 * kMiB,
                        4 * kMiB + 4093, 12 * kMiB + 1}) {
    AlignedBuffer<uint8_t> b(n);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_EQ(b.size(), n);
    const auto at = reinterpret_cast<std::uintptr_t>(b.data());
    EXPECT_EQ(at % kAlignment, 0u) << n;
    EXPECT_TRUE(all_zero(b.data(), n)) << n;
    // Every byte is ours: write the last one and the first (ASan would flag a short allocation).
    if (n > 1) {
      b[n - 1] = 7;
      b[0] = 9;
      EXPECT_EQ(b[n - 1] + b[0], 16);
    }
  }
}

TEST(AlignedBuffer, ResizeGivesZeroesAgain) {
  AlignedBuffer<float> b((std::size_t(4) << 20) / sizeof(float) + 5);
  for (std::size_t i = 0; i < b.size(); i += 1021) b[i] = 1.5f;
  b.resize(b.size() + 17);
  EXPECT_TRUE(all_zero(reinterpret_cast<const uint8_t*>(b.data()), b.size() * sizeof(float)));
  b[b.size() - 1] = 2.0f;
  b.zero();
  EXPECT_EQ(b[b.size() - 1], 0.0f);
}

}  // namespace
}  // namespace ringtrain
