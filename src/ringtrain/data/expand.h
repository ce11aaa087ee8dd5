// infiMNIST-style expansion: many deformed copies of a set of digits. Each output sample i is source
// digit (i mod n) under a random deformation drawn from its own generator, seeded by mix(seed, i), so the
// output depends only on the seed and the count, never on the number of threads. The first n samples
// are the undeformed sources, as in MNIST8M/infiMNIST.
//
// A deformation is an elastic distortion (Simard, Steinkraus & Platt 2003: a random displacement field,
// each component uniform in [-1,1] per pixel, smoothed by a Gaussian of std sigma, scaled by alpha)
// composed with a small random affine transform (rotation, scale, shear, translation) about the image
// centre, resampled bilinearly.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ringtrain/core/rng.h"
#include "ringtrain/data/dataset.h"

namespace ringtrain::data {

struct DeformParams {
  float sigma = 4.0f;            // px, Gaussian smoothing of the displacement field
  float alpha = 34.0f;           // px, scale of the smoothed field
  float max_rotation_deg = 8.0f;
  float max_scale = 0.06f;       // isotropic scale in [1 - max_scale, 1 + max_scale]
  float max_shear = 0.10f;       // horizontal shear factor in [-max_shear, max_shear]
  float max_translation = 1.0f;  // px, each axis
};

// Deforms one rows x cols digit `src` into `dst` with randomness from `rng`.
void deform_digit(uint8_t* dst, const uint8_t* src, int rows, int cols, const DeformParams& params, Rng& rng);

struct ExpandOptions {
  int64_t count = 1000000;
  uint64_t seed = 0;
  int threads = 0;  // 0: every core
  bool keep_originals = true;
  DeformParams deform;
};

// Makes `count` samples from `source` (the training split). progress(done, total) is called about
// twice a second from a reporting thread, and once at the end.
Split expand_split(const Split& source, const ExpandOptions& options,
                   const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace ringtrain::data
