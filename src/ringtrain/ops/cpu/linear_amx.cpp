// The bf16 linear passes on AMX tiles (linear_amx.h): the driver of amx_tiles.h with packers that read the
// fp32 operands and round them into tiles as they go, so each pass touches its operands once:
//   forward          out [N][O] = inp [N][I] . W^T:   A rows of inp (pairs along I), B = W's rows transposed
//   backward-data    dinp [N][I] = dout [N][O] . W:    A rows of dout (pairs along O), B = pairs of W's rows
//   backward-weight  dW [O][I] = dout^T . inp:        A = pairs of dout's rows transposed, B = pairs of inp's rows
// (the transposes are 16 x 16 register transposes of pair words). The same pair words as the vdpbf16ps
// table's packing passes make, summed by tdpbf16ps.
#include "ringtrain/ops/cpu/linear_amx.h"

#include "ringtrain/ops/cpu/amx_pack.h"
#include "ringtrain/ops/cpu/scratch.h"

// g++ 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized flags (as in
// simd_avx512.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ringtrain::ops::cpu {
namespace {

using namespace amx;

// out [n] = the pairwise tree of parts [chunks][n] as tp_reduction's tree_sum adds it (strides doubling:
// ((p0 + p1) + (p2 + p3)) + ...), + bias[o] (O floats a row; null: none) after it. For more chunks than
// chunk_tree_gemm below fuses.
void chunk_tree(float* out, float* parts, int chunks, std::size_t n, const float* bias, int O) {
  for (int stride = 1; stride < chunks; stride *= 2)
    for (int c = 0; c + stride < chunks; c += 2 * stride) {
      float* a = parts + std::size_t(c) * n;
      const float* b = parts + std::size_t(c + stride) * n;
      for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
    }
  for (std::size_t r = 0; r < n / O; ++r)
    for (int o0 = 0; o0 < O; o0 += kTile) {
      const __mmask16 m = first(O - o0);
      const std::size_t i = r * O + o0;
      const R t = _mm512_maskz_loadu_ps(m, parts + i);
      _mm512_mask_storeu_ps(out + i, m, bias ? _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, bias + o0)) : t);
    }
}

// out [N][O] (a bias row, or null) = columns [c0, c0 + I) of inp [N][ld] times those of weight [O][ld], transposed.
void forward_cols(float* out, const float* inp, const float* weight, const float* bias, int N, int O, int I, int ld,
                  int c0) {
  run({N, O, out, std::size_t(O), bias, false}, (I + 1) / 2,
      [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
        pack_rows(dst, [&](int m, int col) { return inp + std::size_t(m) * ld + c0 + col; }, N, I, m0, slabs, k0, kc);
      },
      [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
        pack_rows_transposed(dst, [&](int o, int col) { return weight + std::size_t(o) * ld + c0 + col; }, O, I, n0,
                             slabs, k0, kc);
      });
}

// The split sums with up to 4 chunks, fused: for each 16-row block of C and 16 columns, chunk c's partial is
// accumulated from zero in tile c (tmm0-3) over its S steps, in step order (the bits of one GEMM a chunk);
// the four tiles are stored to a 4 KB buffer and added as chunk_tree adds them, the bias last, while in L1.
// The partials of the unfused form (chunks x N x O floats written and read back) never leave the core.
// pack_a(dst, c, m0) fills chunk c's S tiles of rows m0 .. m0 + 15; bt holds the B tiles [slab][chunk][S].
constexpr int kMaxFusedChunks = 4;

// Chunk c's tdpbf16ps into tile c, its operands in tmm4/tmm6 (even c) or tmm5/tmm7 (odd c): consecutive
// products use other operand tiles, so a load need not wait for the previous product to read its tile.
inline void load_and_dp(int c, const uint32_t* a, const uint32_t* b) {
  switch (c) {
    case 0: _tile_loadd(4, a, 64); _tile_loadd(6, b, 64); _tile_dpbf16ps(0, 4, 6); break;
    case 1: _tile_loadd(5, a, 64); _tile_loadd(7, b, 64); _tile_dpbf16ps(1, 5, 7); break;
    case 2: _tile_loadd(4, a, 64); _tile_loadd(6, b, 64); _tile_dpbf16ps(2, 4, 6); break;
    default: _tile_loadd(5, a, 64); _tile_loadd(7, b, 64); _tile_dpbf16ps(3, 5, 7); break;
  }
}

template <class PackA>
void chunk_tree_gemm(float* out, int M, int N, const float* bias, int chunks, int S, const uint32_t* bt, PackA&& pack_a) {
  configure_tiles();
  uint32_t* ap = pack_buffer(1, std::size_t(kMaxFusedChunks) * S * kTileWords);
  alignas(64) float part[kMaxFusedChunks][kTile * kTile];
  const int nslabs = (N + kTile - 1) / kTile;
  for (int m0 = 0; m0 < M; m0 += kTile) {
    for (int c = 0; c < chunks; ++c) pack_a(ap + std::size_t(c) * S * kTileWords, c, m0);
    const int rows = std::min(kTile, M - m0);
    for (int j = 0; j < nslabs; ++j) {
      const uint32_t* b = bt + std::size_t(j) * chunks * S * kTileWords;
      for (int c = 0; c < chunks; ++c) zero_c(c);
      for (int st = 0; st < S; ++st)  // each chunk's steps in order, the chunks interleaved
        for (int c = 0; c < chunks; ++c)
          load_and_dp(c, ap + (std::size_t(c) * S + st) * kTileWords, b + (std::size_t(c) * S + st) * kTileWords);
      for (int c = 0; c < chunks; ++c) store_c(c, part[c], 64);
      const int n0 = j * kTile;
      const __mmask16 mc = first(N - n0);
      const R bv = bias ? _mm512_maskz_loadu_ps(mc, bias + n0) : _mm512_setzero_ps();
      for (int r = 0; r < rows; ++r) {
        R p[kMaxFusedChunks];
        for (int c = 0; c < chunks; ++c) p[c] = _mm512_load_ps(part[c] + r * kTile);
        for (int stride = 1; stride < chunks; stride *= 2)  // chunk_tree's order
          for (int c = 0; c + stride < chunks; c += 2 * stride) p[c] = _mm512_add_ps(p[c], p[c + stride]);
        _mm512_mask_storeu_ps(out + std::size_t(m0 + r) * N + n0, mc, bias ? _mm512_add_ps(p[0], bv) : p[0]);
      }
    }
  }
}

}  // namespace

void amx_linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearShape& s) {
  forward_cols(out, inp, weight, bias, s.N, s.O, s.I, s.I, 0);
}

void amx_linear_backward_data(float* dinp, const float* dout, const float* weight, const LinearShape& s) {
  run({s.N, s.I, dinp, std::size_t(s.I), nullptr, false}, (s.O + 1) / 2,
      [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
        pack_rows(dst, [&](int m, int col) { return dout + std::size_t(m) * s.O + col; }, s.N, s.O, m0, slabs, k0, kc);
      },
      [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
        pack_row_pairs(dst, [&](int j) { return weight + std::size_t(j) * s.I; }, s.O, s.I, n0, slabs, k0, kc);
      });
}

void amx_linear_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const LinearShape& s) {
  // dbias[o]: the sum over n, in order, of the rounded dout, taken as the first column panel packs dout^T
  // (the driver packs A once a panel and K chunk, K chunks in order).
  if (dbias) std::memset(dbias, 0, sizeof(float) * s.O);
  bool first_panel = true;
  run({s.O, s.I, dweight, std::size_t(s.I), nullptr, false}, (s.N + 1) / 2,
      [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
        pack_row_pairs_transposed(dst, [&](int n) { return dout + std::size_t(n) * s.O; }, s.N, s.O, m0, slabs, k0, kc,
                                  first_panel ? dbias : nullptr);
      },
      [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
        first_panel = n0 == 0;
        pack_row_pairs(dst, [&](int n) { return inp + std::size_t(n) * s.I; }, s.N, s.I, n0, slabs, k0, kc);
      });
}

void amx_linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, const LinearShape& s) {
  if (dinp) amx_linear_backward_data(dinp, dout, weight, s);
  amx_linear_backward_weight(dweight, dbias, dout, inp, s);
}

void amx_linear_forward_chunked(float* out, const float* inp, const float* weight, const float* bias,
                                const LinearShape& s, int chunks) {
  const int Ic = s.I / chunks, S = ((Ic + 1) / 2 + kTile - 1) / kTile;
  const std::size_t n = std::size_t(s.N) * s.O;
  if (chunks <= kMaxFusedChunks) {
    const int nslabs = (s.O + kTile - 1) / kTile;
    uint32_t* bt = reinterpret_cast<uint32_t*>(thread_scratch(std::size_t(nslabs) * chunks * S * kTileWords));
    for (int j = 0; j < nslabs; ++j)
      for (int c = 0; c < chunks; ++c)
        pack_rows_transposed(bt + (std::size_t(j) * chunks + c) * S * kTileWords,
                             [&](int o, int col) { return weight + std::size_t(o) * s.I + c * Ic + col; }, s.O, Ic,
                             j * kTile, 1, 0, (Ic + 1) / 2);
    chunk_tree_gemm(out, s.N, s.O, bias, chunks, S, bt, [&](uint32_t* dst, int c, int m0) {
      pack_rows(dst, [&](int m, int col) { return inp + std::size_t(m) * s.I + c * Ic + col; }, s.N, Ic, m0, 1, 0,
                (Ic + 1) / 2);
    });
    return;
  }
  float* parts = thread_scratch(n * chunks);
  for (int c = 0; c < chunks; ++c) forward_cols(parts + c * n, inp, weight, nullptr, s.N, s.O, Ic, s.I, c * Ic);
  chunk_tree(out, parts, chunks, n, bias, s.O);
}

void amx_linear_backward_data_chunked(float* dinp, const float* dout, const float* weight, const LinearShape& s,
                                      int chunks, int groups) {
  // Chunk c's features: `groups` blocks of `block`, group g's at g O/groups + c block (vit: one head's q, k, v).
  const int block = s.O / groups / chunks, Oc = block * groups, S = ((Oc + 1) / 2 + kTile - 1) / kTile;
  auto feature = [&](int c, int j) { return (j / block) * (s.O / groups) + c * block + j % block; };
  // A tile step reads 32 consecutive features: in place where the blocks are whole steps (vit's 32-feature
  // heads), else from a copy of the chunks' dout columns [chunks][N][Oc].
  const bool in_place = block % (2 * kTile) == 0;
  const bool fused = chunks <= kMaxFusedChunks;
  const int nslabs = (s.I + kTile - 1) / kTile;
  auto whole_lines = [](std::size_t floats) { return (floats + kTile - 1) / kTile * kTile; };  // B tiles: aligned
  const std::size_t n = std::size_t(s.N) * s.I, nx = in_place ? 0 : whole_lines(std::size_t(chunks) * s.N * Oc),
                    np = fused || chunks == 1 ? 0 : whole_lines(n * chunks),
                    nb = fused ? std::size_t(nslabs) * chunks * S * kTileWords : 0;
  float* x = thread_scratch(nx + np + nb);
  float* parts = x + nx;
  uint32_t* bt = reinterpret_cast<uint32_t*>(parts + np);
  if (!in_place)
    for (int c = 0; c < chunks; ++c)
      for (int r = 0; r < s.N; ++r)
        for (int g = 0; g < groups; ++g)
          std::memcpy(x + (std::size_t(c) * s.N + r) * Oc + g * block, dout + std::size_t(r) * s.O + feature(c, g * block),
                      sizeof(float) * block);
  auto a_at = [&](int c) {
    return [&, c](int m, int col) {
      return in_place ? dout + std::size_t(m) * s.O + feature(c, col) : x + (std::size_t(c) * s.N + m) * Oc + col;
    };
  };
  auto b_row = [&](int c) { return [&, c](int j) { return weight + std::size_t(feature(c, j)) * s.I; }; };
  if (fused) {
    for (int j = 0; j < nslabs; ++j)
      for (int c = 0; c < chunks; ++c)
        pack_row_pairs(bt + (std::size_t(j) * chunks + c) * S * kTileWords, b_row(c), Oc, s.I, j * kTile, 1, 0, (Oc + 1) / 2);
    chunk_tree_gemm(dinp, s.N, s.I, nullptr, chunks, S, bt, [&](uint32_t* dst, int c, int m0) {
      pack_rows(dst, a_at(c), s.N, Oc, m0, 1, 0, (Oc + 1) / 2);
    });
    return;
  }
  for (int c = 0; c < chunks; ++c)
    run({s.N, s.I, chunks > 1 ? parts + c * n : dinp, std::size_t(s.I), nullptr, false}, (Oc + 1) / 2,
        [&](uint32_t* dst, int m0, int slabs, int k0, int kc) { pack_rows(dst, a_at(c), s.N, Oc, m0, slabs, k0, kc); },
        [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
          pack_row_pairs(dst, b_row(c), Oc, s.I, n0, slabs, k0, kc);
        });
  if (chunks > 1) chunk_tree(dinp, parts, chunks, n, nullptr, s.I);
}

}  // namespace ringtrain::ops::cpu

#pragma GCC diagnostic pop
