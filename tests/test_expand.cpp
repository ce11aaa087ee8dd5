// infiMNIST-style expansion: determinism independent of threads, labels kept, and deformed digits
// that keep their source's ink mass and position within stated bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/data/expand.h"

namespace ringtrain::data {
namespace {

// A toy source split: per sample, a digit-like ring ("0") or slanted stroke ("1") drawn anti-aliased,
// about 3 px wide like MNIST's pen, centred near the middle like MNIST digits.
Split toy_source(int n) {
  Split s;
  s.count = n;
  s.rows = s.cols = 28;
  s.images.assign(size_t(n) * 784, 0);
  s.labels.resize(n);
  for (int i = 0; i < n; ++i) {
    s.labels[i] = uint8_t(i % 10);
    uint8_t* img = s.images.data() + size_t(i) * 784;
    const float r = 5.0f + float(i % 4);
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        float d = i % 2 ? std::fabs(std::hypot(x - 13.5f, y - 13.5f) - r) : std::fabs(x - 13.5f - 0.3f * (y - 13.5f));
        if (i % 2 == 0) d = std::max(d, std::fabs(y - 13.5f) - 8.0f);  // a stroke 16 px long
        float v = std::clamp(2.0f - d, 0.0f, 1.0f);
        img[y * 28 + x] = uint8_t(std::lround(255 * v));
      }
  }
  return s;
}

struct Moments {
  double mass, cy, cx;
};

Moments moments(const uint8_t* img) {
  Moments m{0, 0, 0};
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) {
      m.mass += img[y * 28 + x];
      m.cy += double(y) * img[y * 28 + x];
      m.cx += double(x) * img[y * 28 + x];
    }
  m.cy /= m.mass;
  m.cx /= m.mass;
  return m;
}

TEST(Expand, SameSeedIsByteIdenticalWithOneAndTwoThreads) {
  Split src = toy_source(20);
  ExpandOptions o;
  o.count = 500;
  o.seed = 42;
  o.threads = 1;
  Split one = expand_split(src, o);
  o.threads = 2;
  Split two = expand_split(src, o);
  EXPECT_EQ(one.images, two.images);
  EXPECT_EQ(one.labels, two.labels);
  o.seed = 43;
  Split other = expand_split(src, o);
  EXPECT_NE(one.images, other.images);
  EXPECT_EQ(one.labels, other.labels);
}

TEST(Expand, KeepsLabelsAndOriginalsAndDeformsTheRest) {
  Split src = toy_source(10);
  ExpandOptions o;
  o.count = 35;
  o.seed = 1;
  Split out = expand_split(src, o);
  ASSERT_EQ(out.count, 35);
  for (int64_t i = 0; i < out.count; ++i) EXPECT_EQ(out.labels[i], src.labels[i % 10]) << i;
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_TRUE(std::equal(src.image(i), src.image(i) + 784, out.image(i))) << "original " << i << " changed";
  for (int64_t i = 10; i < 35; ++i)
    EXPECT_FALSE(std::equal(src.image(i % 10), src.image(i % 10) + 784, out.image(i))) << "sample " << i;
}

// The bounds the issue states: ink mass within +-30% of the source, centre of mass within 3 px.
TEST(Expand, DeformedDigitsKeepMassAndPosition) {
  Split src = toy_source(40);
  ExpandOptions o;
  o.count = 4000;
  o.seed = 7;
  Split out = expand_split(src, o);
  double worst_mass = 0, worst_shift = 0;
  for (int64_t i = src.count; i < out.count; ++i) {
    Moments a = moments(src.image(i % src.count)), b = moments(out.image(i));
    worst_mass = std::max(worst_mass, std::fabs(b.mass / a.mass - 1.0));
    worst_shift = std::max(worst_shift, std::hypot(b.cy - a.cy, b.cx - a.cx));
  }
  EXPECT_LT(worst_mass, 0.30);
  EXPECT_LT(worst_shift, 3.0);
  std::printf("worst relative mass change %.3f, worst centre shift %.2f px over %lld samples\n", worst_mass,
              worst_shift, (long long)(out.count - src.count));
}

TEST(Expand, RejectsNonsense) {
  Split src = toy_source(3);
  ExpandOptions o;
  o.count = 0;
  EXPECT_THROW(expand_split(src, o), Error);
  o.count = 10;
  o.deform.sigma = 0;
  EXPECT_THROW(expand_split(src, o), Error);
  Split empty;
  o.deform.sigma = 4;
  EXPECT_THROW(expand_split(empty, o), Error);
}

}  // namespace
}  // namespace ringtrain::data
