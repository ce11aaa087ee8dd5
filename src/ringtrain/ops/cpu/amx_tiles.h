// The AMX tile driver of the bf16 GEMMs (gemm_bf16_amx.cpp) and the implicit-GEMM convolutions
// (zoo_conv_amx.cpp): C [M][N] (+)= A . B over pair words, where the caller's packers put A and B into tiles.
// Include only from *_amx.cpp files (needs -mamx-tile -mamx-bf16 -mavx512f).
//
// Tiles: tmm0-3 hold a 32 x 32 block of C as 2 x 2 tiles of 16 x 16 fp32, tmm4-5 two 16-row slabs of A
// (16 pair words = 32 bf16 a row), tmm6-7 two 16-column slabs of B (16 pair rows). Each step of 16 pair
// words loads 4 tiles and issues 4 tdpbf16ps. BLIS-style blocking: columns in panels of 512, the reduction
// in chunks of 256 pair words; each panel's chunk of B is packed once into contiguous 1 KB tiles (L2), each
// 32-row block's chunk of A into the same (32 KB: L1) and meets the whole panel. The packers zero-pad past
// M, N and KP, so no tile reads outside the operands; C tiles that cross row M or column N go through a
// 16 x 16 buffer. (Tile loads straight from row-major A and B ran at 300-650 GFLOP/s: B's rows streamed
// from L3 and, at strides that are multiples of 4 KB, fell into one L1 set.)
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ringtrain/core/aligned.h"

namespace ringtrain::ops::cpu::amx {

constexpr int kTile = 16;       // rows of every tile; fp32 columns of a C tile, pair words of an A row
constexpr int kBlock = 2 * kTile;  // rows and columns of C a block

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes a row
  uint8_t rows[16] = {};
};

// Every thread configures its own tiles; a call loads the configuration again (a few dozen cycles against
// a GEMM's thousands), so nothing else that uses the tiles in between (a rival library) can leave them wrong.
inline void configure_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = kTile, c.colsb[t] = 64;
  _tile_loadconfig(&c);
}

// The tile instructions take their tile register as a literal: a C tile t in 0..3 through a switch that
// inlining folds away.
inline void load_c(int t, const void* p, std::size_t stride) {
  switch (t) {
    case 0: _tile_loadd(0, p, stride); break;
    case 1: _tile_loadd(1, p, stride); break;
    case 2: _tile_loadd(2, p, stride); break;
    default: _tile_loadd(3, p, stride); break;
  }
}
inline void zero_c(int t) {
  switch (t) {
    case 0: _tile_zero(0); break;
    case 1: _tile_zero(1); break;
    case 2: _tile_zero(2); break;
    default: _tile_zero(3); break;
  }
}
inline void store_c(int t, void* p, std::size_t stride) {
  switch (t) {
    case 0: _tile_stored(0, p, stride); break;
    case 1: _tile_stored(1, p, stride); break;
    case 2: _tile_stored(2, p, stride); break;
    default: _tile_stored(3, p, stride); break;
  }
}

// Where C goes: C [M][N] (ldc floats a row), the bias row added on the first K chunk (null: none) unless
// the call accumulates onto C.
struct Output {
  int M, N;
  float* C;
  std::size_t ldc;
  const float* bias;
  bool accumulate;
};

// C tile (i, j) of a block: straight from and to C when it lies inside M x N, else through a 16 x 16 buffer.
struct TileIo {
  float* c;
  std::size_t ldc;
  int rows, cols;  // inside M x N
  bool whole() const { return rows == kTile && cols == kTile; }
};

// first: the block's first K chunk (C starts from the bias row or 0, unless the call accumulates).
inline void init_tile(int t, const Output& g, const TileIo& io, int n, bool first, float* buf) {
  const bool from_c = g.accumulate || !first;
  const float* bias = first ? g.bias : nullptr;
  if (io.whole()) {
    if (from_c) return load_c(t, io.c, io.ldc * 4);
    if (bias) return load_c(t, bias + n, 0);  // stride 0: the bias row in every row
    return zero_c(t);
  }
  std::memset(buf, 0, sizeof(float) * kTile * kTile);
  for (int r = 0; r < io.rows; ++r)
    for (int c = 0; c < io.cols; ++c) buf[r * kTile + c] = from_c ? io.c[r * io.ldc + c] : bias ? bias[n + c] : 0.0f;
  load_c(t, buf, 64);
}
inline void finish_tile(int t, const TileIo& io, float* buf) {
  if (io.whole()) return store_c(t, io.c, io.ldc * 4);
  store_c(t, buf, 64);
  for (int r = 0; r < io.rows; ++r) std::memcpy(io.c + r * io.ldc, buf + r * kTile, sizeof(float) * io.cols);
}

// Packed operands: a slab is 16 rows (A) or 16 columns (B) of one K chunk, as `steps` tiles of 16 x 16 words,
// each tile 1 KB contiguous (rows 64 bytes apart: no cache-set conflicts, whatever lda and ldb are), zero past
// M, N and KP.
constexpr std::size_t kTileWords = kTile * kTile;

// The first n lanes of 16 (none for n <= 0, all for n >= 16).
inline __mmask16 first(int n) { return n >= kTile ? __mmask16(0xFFFF) : __mmask16((1u << std::max(n, 0)) - 1u); }
inline int round_up(int n, int m) { return (n + m - 1) / m * m; }

// 16 words src -> dst, or only the first n (zeros after them).
inline void copy_row(uint32_t* dst, const uint32_t* src, int n) {
  _mm512_store_si512(dst, _mm512_maskz_loadu_epi32(first(n), src));
}
// One block of MT x NT tiles (MT, NT in 1..2) at rows m0, columns n0 over one K chunk: A's slabs at a, B's at
// b (consecutive slabs `steps` tiles apart).
template <int MT, int NT>
inline void block(const Output& g, const uint32_t* a, const uint32_t* b, int steps, int m0, int n0, bool first) {
  alignas(64) float buf[4][kTile * kTile];
  TileIo io[2][2];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NT; ++j) {
      const int m = m0 + i * kTile, n = n0 + j * kTile;
      io[i][j] = {g.C + std::size_t(m) * g.ldc + n, g.ldc, std::min(kTile, g.M - m), std::min(kTile, g.N - n)};
      init_tile(2 * i + j, g, io[i][j], n, first, buf[2 * i + j]);
    }
  const std::size_t slab = std::size_t(steps) * kTileWords;
  for (int st = 0; st < steps; ++st, a += kTileWords, b += kTileWords) {
    // each product issued as soon as its operands are loaded
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(7, b + slab, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MT > 1) {
      _tile_loadd(5, a + slab, 64);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NT; ++j) finish_tile(2 * i + j, io[i][j], buf[2 * i + j]);
}

// Per-thread buffers for the packed operands.
inline uint32_t* pack_buffer(int slot, std::size_t words) {
  thread_local AlignedBuffer<uint32_t> buf[2];
  if (buf[slot].size() < words) buf[slot].resize(words);
  return buf[slot].data();
}

// K chunks of 256 pair words (512 bf16 products a dot): a packed A block (32 rows) is 32 KB and stays in L1
// while it meets every column block of the B panel (up to 512 columns, 512 KB: L2; one panel for every vit linear).
constexpr int kKc = 256, kNc = 512;

// Packers for row-major pair-word operands (A [M][lda], B [KP][ldb], ldb a multiple of 16):
// A's rows [m0, m0 + 16 * slabs) x words [k0, k0 + kc) -> slabs of tiles (tile row r = A row, 16 words).
inline void pack_rows_a(uint32_t* dst, const uint32_t* A, std::size_t lda, int M, int m0, int slabs, int k0, int kc) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int sl = 0; sl < slabs; ++sl)
    for (int r = 0; r < kTile; ++r) {
      const int m = m0 + sl * kTile + r;
      uint32_t* d = dst + std::size_t(sl) * steps * kTileWords + r * kTile;
      const uint32_t* src = A + std::size_t(std::min(m, M - 1)) * lda + k0;
      for (int st = 0; st < steps; ++st, d += kTileWords) copy_row(d, src + st * kTile, m < M ? kc - st * kTile : 0);
    }
}
// B's pair rows [k0, k0 + kc) x columns [n0, n0 + 16 * slabs) -> slabs of tiles (tile row r = pair row k0 + 16 st + r).
inline void pack_rows_b(uint32_t* dst, const uint32_t* B, std::size_t ldb, int n0, int slabs, int k0, int kc) {
  const int steps = (kc + kTile - 1) / kTile;
  for (int st = 0; st < steps; ++st)
    for (int r = 0; r < kTile; ++r) {
      const int k = st * kTile + r;
      const uint32_t* src = B + std::size_t(k0 + std::max(0, std::min(k, kc - 1))) * ldb + n0;
      uint32_t* d = dst + std::size_t(st) * kTileWords + r * kTile;
      for (int sl = 0; sl < slabs; ++sl) copy_row(d + std::size_t(sl) * steps * kTileWords, src + sl * kTile, k < kc ? kTile : 0);
    }
}

// The driver. pack_a(dst, m0, slabs, k0, kc) fills `slabs` (1 or 2) slabs of A rows [m0, m0 + 16 slabs) over
// pair words [k0, k0 + kc) as steps = ceil(kc / 16) tiles each (slab s at dst + s * steps * 256 words; tile
// row r = row m0 + 16 s + r; zeros past M and kc); pack_b(dst, n0, slabs, k0, kc) likewise for B's columns
// (tile row r = pair row k0 + 16 st + r, 16 columns). KP: the reduction's pair words.
template <class PackA, class PackB>
void run(const Output& g, int KP, PackA&& pack_a, PackB&& pack_b) {
  if (g.M <= 0 || g.N <= 0) return;
  configure_tiles();
  uint32_t* bp = pack_buffer(0, std::size_t(kNc / kTile) * (kKc / kTile) * kTileWords);
  uint32_t* ap = pack_buffer(1, std::size_t(2) * (kKc / kTile) * kTileWords);
  const int ncols = round_up(g.N, kTile);
  for (int n0 = 0; n0 < ncols; n0 += kNc) {
    const int nc = std::min(kNc, ncols - n0), nslabs = nc / kTile;
    for (int k0 = 0; k0 < std::max(KP, 1); k0 += kKc) {
      const int kc = std::max(0, std::min(kKc, KP - k0)), steps = (kc + kTile - 1) / kTile;
      const bool first = k0 == 0;
      pack_b(bp, n0, nslabs, k0, kc);
      const std::size_t slab = std::size_t(steps) * kTileWords;
      for (int m0 = 0; m0 < g.M; m0 += kBlock) {
        const int mt = g.M - m0 > kTile ? 2 : 1;
        pack_a(ap, m0, mt, k0, kc);
        int j = 0;
        for (; j + 2 <= nslabs; j += 2) {
          if (mt == 2) block<2, 2>(g, ap, bp + j * slab, steps, m0, n0 + j * kTile, first);
          else block<1, 2>(g, ap, bp + j * slab, steps, m0, n0 + j * kTile, first);
        }
        if (j < nslabs) {
          if (mt == 2) block<2, 1>(g, ap, bp + j * slab, steps, m0, n0 + j * kTile, first);
          else block<1, 1>(g, ap, bp + j * slab, steps, m0, n0 + j * kTile, first);
        }
      }
    }
  }
}

}  // namespace ringtrain::ops::cpu::amx
