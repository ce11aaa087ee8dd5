// Elementwise ops between layers: the residual add, dropout and the per-sample transpose.
//   add: out = a + b over n values (its backward is two copies of dout, done by the layer).
//   transpose_samples: dst[n][j][i] = src[n][i][j] for i < rows, j < cols (vit's patch tokens
//     [D][h*w] <-> [h*w][D]; its own backward with rows and cols swapped).
//   dropout (torch.nn.Dropout in training): out = x * keep / (1 - p), where keep for element e of sample n
//     is a pure function of (seed, step, sample_id(n), e) and the layer's salt - dropout_keep() below - so
//     backward recomputes the mask instead of storing it, and a resumed or re-sharded run draws the same
//     masks. The salt (a hash of the layer's name) keeps two dropout layers of one model from drawing the
//     same mask for a sample. p >= 1 zeroes everything (torch's special case); p == 0 is the identity.
#pragma once
#include <cmath>
#include <cstdint>

#include "ringtrain/core/rng.h"

namespace ringtrain::ops {

struct DropoutShape {
  int N = 1;           // samples
  int64_t F = 1;       // values per sample
  double p = 0.5;      // drop probability
  uint64_t seed = 0;   // the run's seed
  int64_t step = 0;    // the training step
  const int64_t* sample_ids = nullptr;  // N dataset indices (null: first_sample + n)
  int64_t first_sample = 0;
  uint64_t salt = 0;   // per layer: dropout_salt(name)
  int64_t sample_id(int n) const { return sample_ids ? sample_ids[n] : first_sample + n; }
};

// A layer's salt: FNV-1a of its name.
inline uint64_t dropout_salt(const char* name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *name; ++name) h = (h ^ uint8_t(*name)) * 0x100000001b3ULL;
  return h;
}
// The per-sample key of the mask (mix64 of seed, salt, step and sample id), and whether element e is kept:
// the top 32 bits of mix64(key + e) against round(p * 2^32), so P(keep) = 1 - p to within 2^-32.
// (Inline: the fast kernels call them per element.)
inline uint64_t dropout_sample_key(uint64_t seed, uint64_t salt, int64_t step, int64_t sample_id) {
  return mix64(mix64(mix64(mix64(seed ^ 0x64726f706f7574ULL) ^ salt) ^ uint64_t(step)) ^ uint64_t(sample_id));
}
inline uint64_t dropout_threshold(double p) { return uint64_t(std::llround(p * 4294967296.0)); }
inline bool dropout_keep(uint64_t key, int64_t e, uint64_t threshold) {
  return (mix64(key + uint64_t(e)) >> 32) >= threshold;
}

namespace ref {
template <typename T>
void add_forward(T* out, const T* a, const T* b, int64_t n);
// Overwrites out; the backward takes dout in place of x (the same mask and scale).
template <typename T>
void dropout_forward(T* out, const T* x, const DropoutShape& s);
template <typename T>
void transpose_samples(T* dst, const T* src, int N, int rows, int cols);
}  // namespace ref

}  // namespace ringtrain::ops
