// Packers for the AMX tile driver (amx_tiles.h) that read fp32 operands and round them to bf16 as they fill
// the tiles (vcvtne*ps2bf16: nearest even, subnormals flushed): rows with pairs along their columns, the same
// transposed, and pairs of rows (16 x 16 register transposes where the tile runs across the source's rows).
// Shared by the linears (linear_amx.cpp) and the convolutions (zoo_conv_amx.cpp). Include only from *_amx.cpp.
#pragma once
#include "ringtrain/ops/cpu/amx_tiles.h"
#include "ringtrain/ops/cpu/simd_avx512.h"

namespace ringtrain::ops::cpu::amx {

using R = __m512;

// The first n (<= 32) of the 32 floats at p (zeros after them) as 16 pair words, in order.
inline __m512i pairs32(const float* p, int n) {
  const R lo = _mm512_maskz_loadu_ps(first(n), p), hi = _mm512_maskz_loadu_ps(first(n - kTile), p + kTile);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}
// [a_0 .. a_15, b_0 .. b_15] (16-bit words) -> 16 pair words (a_i, b_i).
inline __m512i interleave_words(__m512i both) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, both);
}
// 16 pair words (bf16(a_i), bf16(b_i)).
inline __m512i pair_words(R a, R b) { return interleave_words((__m512i)_mm512_cvtne2ps_pbh(b, a)); }
// 16 pair words from two runs of 16 bf16 values.
inline __m512i pair_words(__m256i a, __m256i b) {
  return interleave_words(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
}
inline void store_row(uint32_t* d, __m512i v) { _mm512_store_si512(d, v); }
inline void store_row(uint32_t* d, R v) { _mm512_store_ps(reinterpret_cast<float*>(d), v); }

// Tiles whose rows are source rows, pairs along the source's columns: tile row r of slab sl = source row
// m0 + 16 sl + r (at(row, col): the address of column col of that row, 32 columns a step contiguous), zero
// from row M and column K on.
template <class At>
void pack_rows(uint32_t* dst, At at, int M, int K, int m0, int slabs, int k0, int kc) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int sl = 0; sl < slabs; ++sl)
    for (int r = 0; r < kTile; ++r) {
      const int m = m0 + sl * kTile + r;
      uint32_t* d = dst + std::size_t(sl) * steps * kTileWords + r * kTile;
      for (int st = 0; st < steps; ++st, d += kTileWords) {
        const int col = 2 * (k0 + st * kTile), n = m < M ? std::min(2 * kTile, K - col) : 0;
        store_row(d, n > 0 ? pairs32(at(m, col), n) : _mm512_setzero_si512());
      }
    }
}
// The same pair words transposed: tile row r of slab sl = pair index k0 + 16 st + r, its 16 words the source
// rows m0 + 16 sl .. (zero from row M and column K on).
template <class At>
void pack_rows_transposed(uint32_t* dst, At at, int M, int K, int m0, int slabs, int k0, int kc) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int sl = 0; sl < slabs; ++sl)
    for (int st = 0; st < steps; ++st) {
      const int col = 2 * (k0 + st * kTile);
      R v[kTile];
      for (int i = 0; i < kTile; ++i) {
        const int m = m0 + sl * kTile + i, n = m < M ? std::min(2 * kTile, K - col) : 0;
        v[i] = _mm512_castsi512_ps(n > 0 ? pairs32(at(m, col), n) : _mm512_setzero_si512());
      }
      VecAvx512::transpose_regs(v);
      uint32_t* d = dst + (std::size_t(sl) * steps + st) * kTileWords;
      for (int r = 0; r < kTile; ++r) store_row(d + r * kTile, v[r]);
    }
}
// Row j's 16 values at columns c0 .. (mask mc), or zeros when j is not one of the `rows` rows or `in` is false.
template <class Row>
inline R row_values(Row row, int j, int rows, bool in, int c0, __mmask16 mc) {
  return in && j < rows ? _mm512_maskz_loadu_ps(mc, row(j) + c0) : _mm512_setzero_ps();
}

// Tiles of pairs of source rows: tile row r = pair kp = k0 + 16 st + r, word i = (row(2 kp)[c], row(2 kp + 1)[c])
// for the 16 columns c = n0 + 16 sl + i (zero from row `rows` and column `cols` on; row(j): row j's address).
template <class Row>
void pack_row_pairs(uint32_t* dst, Row row, int rows, int cols, int n0, int slabs, int k0, int kc) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int sl = 0; sl < slabs; ++sl) {
    const int c0 = n0 + sl * kTile;
    const __mmask16 mc = first(cols - c0);
    for (int st = 0; st < steps; ++st)
      for (int r = 0; r < kTile; ++r) {
        const int kp = k0 + st * kTile + r, j = 2 * kp;
        const bool in = kp < k0 + kc;
        const R a = row_values(row, j, rows, in, c0, mc), b = row_values(row, j + 1, rows, in, c0, mc);
        store_row(dst + (std::size_t(sl) * steps + st) * kTileWords + r * kTile, pair_words(a, b));
      }
  }
}
// x rounded to bf16 as core/half.h's round_bf16 rounds it (the bias gradient's rounded dout).
inline R round_r(R x) { return VecAvx512::round_bf16(x); }

// A' = A^T pairs: tile row r of slab sl = source column m0 + 16 sl + r, word j = (row(2 kp)[col], row(2 kp + 1)[col])
// for kp = k0 + 16 st + j (the weight gradient's dout^T; zero from row `rows` and column `cols` on). sums (null:
// none) += each column's rounded values, row by row in order: the bias gradient, in the pass that reads dout.
template <class Row>
void pack_row_pairs_transposed(uint32_t* dst, Row row, int rows, int cols, int m0, int slabs, int k0, int kc,
                               float* sums) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int sl = 0; sl < slabs; ++sl) {
    const int c0 = m0 + sl * kTile;
    const __mmask16 mc = first(cols - c0);
    R sum = sums ? _mm512_maskz_loadu_ps(mc, sums + c0) : _mm512_setzero_ps();
    for (int st = 0; st < steps; ++st) {
      R v[kTile];
      for (int i = 0; i < kTile; ++i) {
        const int kp = k0 + st * kTile + i, j = 2 * kp;
        const bool in = kp < k0 + kc;
        const R a = row_values(row, j, rows, in, c0, mc), b = row_values(row, j + 1, rows, in, c0, mc);
        v[i] = _mm512_castsi512_ps(pair_words(a, b));  // column kp of the tile: 16 source columns
        if (sums && in && j < rows) sum = _mm512_add_ps(sum, round_r(a));
        if (sums && in && j + 1 < rows) sum = _mm512_add_ps(sum, round_r(b));
      }
      VecAvx512::transpose_regs(v);
      uint32_t* d = dst + (std::size_t(sl) * steps + st) * kTileWords;
      for (int r = 0; r < kTile; ++r) store_row(d + r * kTile, v[r]);
    }
    if (sums) _mm512_mask_storeu_ps(sums + c0, mc, sum);
  }
}

}  // namespace ringtrain::ops::cpu::amx
