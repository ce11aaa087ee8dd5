// bf16 kernels with AVX512_BF16 (vdpbf16ps: each 32-bit lane adds the fp32 sum of two exact bf16
// products), in the fp32 kernels' design (kernels_impl.inc): samples side by side in the 16 lanes, the
// same register-blocked tiles, the same fused conv + bias + ReLU + 2x2 max-pool. Where the fp32 kernel
// multiplies one operand pair a lane, this one multiplies two, paired along a reduction index:
//   forward          pairs of input channels (c, c+1) for even C (conv2: XC, S instructions a kernel row);
//                    pairs of kernel rows (r, r+1) for C = 1 (conv1: XR, 13 instructions a 5 x 5 output
//                    instead of 15 for column pairs); pairs of kernel columns (s, s+1) otherwise (XW
//                    [C][Hp][Wp][16] holds (x[w], x[w+1]) per lane, weights (w[s], w[s+1]) broadcast)
//   backward-weight  pairs of output columns (q, q+1): DQ [K][P][Q/2][16] = (d[q], d[q+1]) against XW
//   backward-data    pairs of output channels (k, k+1): DK [K/2][P][Q][16] against weight pairs
//   linear           pairs along the reduction (I forward, O for dinp, N for dweight) in a BLIS-style
//                    8 x 3-vector micro-kernel like the fp32 GEMM
// What the fused layers keep between forward and backward is smaller than the fp32 kernels' (it is read
// back from memory a whole step later): the input in bf16 (the backward rebuilds XW in cache) and one
// byte a pool code. Between two chained fused layers (conv1 -> conv2) the activation and its gradient stay
// in the blocked [N/16][F][16] layout (conv_pool.h), with no transposes out and back in.
// Operands are rounded to bf16 on their way in (lowp.h); accumulation and results are fp32. Shapes the
// tiles do not cover (stride != 1, kernel widths other than 3 and 5) run the rounding fallback (lowp.cpp).
// The conversions inside use vcvtne2ps2bf16, which treats fp32 subnormal inputs as zero (below 1.2e-38:
// far under anything a gradient or activation of this model carries after loss scaling).
// Include only here: needs -mavx512bf16.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/half.h"
#include "ringtrain/ops/cpu/bf16_tables.h"
#include "ringtrain/ops/cpu/conv_as_linear.h"
#include "ringtrain/ops/cpu/gemm_bf16_amx.h"
#include "ringtrain/ops/cpu/linear_amx.h"
#include "ringtrain/ops/cpu/zoo_conv_amx.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/simd_avx512.h"
#include "ringtrain/ops/cpu/tables.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecAvx512;
struct Cfg {
  static constexpr int fwd_kb = 2, fwd_qb = 6, bwd_data_cb = 2, bwd_data_qb = 6, bwd_weight_kb = 4, bwd_weight_qb = 6,
                       gemm_mr = 8, gemm_nv = 3, gemm_kc = 128, ig_mr = 12, ig_nv = 2, ig_tc = 256;
  // The depthwise and implicit-GEMM kernels of this build's zoo_conv_impl.inc round what they copy:
  // dst <- src rounded (dst == src: in place), nearest even with round_bf16's integer rounding (core/half.h; NaN
  // quiet); a tail through round_bf16.
  static void round_operands(float* dst, const float* src, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) V::store(dst + i, V::round_bf16(V::load(src + i)));
    if (i < n) round_bf16(dst + i, src + i, n - i);
  }
};

// The fp32 algorithms and layout helpers (to_blocked, pool4, unpool_block, ...), this ISA's copy.
#include "ringtrain/ops/cpu/kernels_impl.inc"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

using u32a = uint32_t __attribute__((may_alias));  // pair words written into float scratch
using B = __m512i;                                  // 16 pairs of bf16

inline uint32_t pair_bits(float first, float second) {
  return uint32_t(float_to_bf16(first)) | (uint32_t(float_to_bf16(second)) << 16);
}
// 16 lanes of (a[i], b[i]) pairs: element 2i = a[i], 2i+1 = b[i].
// [a0..a15, b0..b15] (16-bit words) -> pairs (a_i, b_i).
inline B interleave_words(__m512i both) {
  // Word 2i <- a_i (word i), 2i+1 <- b_i (word 16+i); a constant the compiler keeps in a register
  // (a function-local static would cost a guard check every call).
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, both);
}
inline B interleave(R a, R b) { return interleave_words((__m512i)_mm512_cvtne2ps_pbh(b, a)); }  // [a.., b..]
// 16 lanes of bf16 (one 256-bit row of a bf16 copy): store, load, and the pairs of two such rows.
using H = __m256i;
inline H to_bf16(R a) { return (H)_mm512_cvtneps_pbh(a); }
inline void storeh(uint16_t* p, H v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline H loadh(const uint16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline B interleave_h(H a, H b) { return interleave_words(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1)); }
inline B loadb(const u32a* p) { return _mm512_loadu_si512(p); }
inline void storeb(u32a* p, B v) { _mm512_storeu_si512(p, v); }
inline R dp(R acc, B a, B b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
// The pair word at p in all 16 lanes, as one broadcast load (vbroadcastss from memory: set1_epi32 of a
// loaded integer costs a scalar load plus a register broadcast).
using f32a = float __attribute__((may_alias));
inline B bcastp(const u32a* p) { return _mm512_castps_si512(_mm512_set1_ps(*reinterpret_cast<const f32a*>(p))); }

bool fast_conv(const Conv2dShape& s) { return s.stride == 1 && (s.S == 5 || s.S == 3) && s.P() % 2 == 0 && s.Q() % 2 == 0; }
// Blocked activations (conv_pool.h): the tiled shapes, in whole blocks of L samples.
bool crp_blocked(const Conv2dShape& s) { return fast_conv(s) && s.N % L == 0; }
inline bool any_blocked(const Conv2dShape& s) { return s.in_blocked || s.out_blocked; }

// ---- layouts ----------------------------------------------------------------------------------------
// X16 [C][Hp][Wp][L] bf16 from X [C][Hp][Wp][L] fp32: what the saved state keeps of the input.
inline void make_x16(uint16_t* X16, const float* X, const Geo& g) {
  for (std::size_t i = 0; i < g.x_floats(); i += L) storeh(X16 + i, to_bf16(V::load(X + i)));
}
// XW [C][Hp][Wp][L] pairs (x[w], x[w+1]) (0 past the row end) from X16: the same words as make_xw.
inline void make_xw16(u32a* XW, const uint16_t* X16, const Geo& g) {
  for (int c = 0; c < g.C; ++c)
    for (int h = 0; h < g.Hp; ++h) {
      const std::size_t row = (std::size_t(c) * g.Hp + h) * g.Wp * L;
      const uint16_t* x = X16 + row;
      u32a* o = XW + row;
      H cur = loadh(x);
      for (int w = 0; w < g.Wp; ++w) {
        const H next = w + 1 < g.Wp ? loadh(x + std::size_t(w + 1) * L) : _mm256_setzero_si256();
        storeb(o + std::size_t(w) * L, interleave_h(cur, next));
        cur = next;
      }
    }
}
// Blocked activations are bf16 (conv_pool.h): 16 lanes of 16-bit words a position.
// X16 [C][Hp][Wp][L] (zero border) from a block of the unpadded blocked bf16 input [C][H][W][L].
inline void pad_block16(uint16_t* X16, const uint16_t* src, const Geo& g) {
  if (!g.pad) return static_cast<void>(std::memcpy(X16, src, g.x_floats() * sizeof(uint16_t)));
  std::memset(X16, 0, g.x_floats() * sizeof(uint16_t));
  for (int c = 0; c < g.C; ++c)
    for (int h = 0; h < g.H; ++h)
      std::memcpy(X16 + ((std::size_t(c) * g.Hp + h + g.pad) * g.Wp + g.pad) * L, src + (std::size_t(c) * g.H + h) * g.W * L,
                  std::size_t(g.W) * L * sizeof(uint16_t));
}
// XC [C/2][Hp][Wp][L] channel pairs from X16 (C even): the same words as make_xc.
inline void make_xc16(u32a* XC, const uint16_t* X16, const Geo& g) {
  const std::size_t plane = std::size_t(g.Hp) * g.Wp * L;
  for (int cp = 0; cp < g.C / 2; ++cp)
    for (std::size_t i = 0; i < plane; i += L)
      storeb(XC + cp * plane + i, interleave_h(loadh(X16 + 2 * cp * plane + i), loadh(X16 + (2 * cp + 1) * plane + i)));
}
// bf16 of x with round_bf16's integer rounding (core/half.h: nearest even, NaN quiet, subnormals kept), for
// gradients handed over blocked: the consumer's own rounding of the fp32 value would give the same bits.
inline H to_bf16_exact(R x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), nan));
}
inline R widen(H h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
// The interior of DX [C][Hp][Wp][L] into a block of unpadded blocked bf16 dinp [C][H][W][L].
inline void unpad_block16(uint16_t* dst, const float* DX, const Geo& g) {
  for (int c = 0; c < g.C; ++c)
    for (int h = 0; h < g.H; ++h) {
      const float* x = DX + ((std::size_t(c) * g.Hp + h + g.pad) * g.Wp + g.pad) * L;
      uint16_t* d = dst + (std::size_t(c) * g.H + h) * g.W * L;
      for (int w = 0; w < g.W; ++w) storeh(d + std::size_t(w) * L, to_bf16_exact(V::load(x + std::size_t(w) * L)));
    }
}
// XW [C][Hp][Wp][L] pairs (x[w], x[w+1]) (0 past the row end) from X [C][Hp][Wp][L] fp32.
inline void make_xw(u32a* XW, const float* X, const Geo& g) {
  for (int c = 0; c < g.C; ++c)
    for (int h = 0; h < g.Hp; ++h) {
      const float* x = X + (std::size_t(c) * g.Hp + h) * g.Wp * L;
      u32a* o = XW + (std::size_t(c) * g.Hp + h) * g.Wp * L;
      R cur = V::load(x);
      for (int w = 0; w < g.Wp; ++w) {
        const R next = w + 1 < g.Wp ? V::load(x + std::size_t(w + 1) * L) : V::zero();
        storeb(o + std::size_t(w) * L, interleave(cur, next));
        cur = next;
      }
    }
}
// WF [K][C][R][SP] pairs (w[s], w[s+1]) for s = 0, 2, ...; a missing last partner is 0.
inline void pack_wf(u32a* WF, const float* weight, const Geo& g, int SP) {
  for (int k = 0; k < g.K; ++k)
    for (int c = 0; c < g.C; ++c)
      for (int r = 0; r < g.R; ++r)
        for (int sp = 0; sp < SP; ++sp) {
          const float* w = g.w(weight, k, c, r, 0);
          WF[((std::size_t(k) * g.C + c) * g.R + r) * SP + sp] = pair_bits(w[2 * sp], 2 * sp + 1 < g.S ? w[2 * sp + 1] : 0.0f);
        }
}
// WK [K/2][C][R][S] pairs (w[k], w[k+1]); a missing last partner is 0.
inline void pack_wk(u32a* WK, const float* weight, const Geo& g) {
  const int KP = (g.K + 1) / 2;
  for (int kp = 0; kp < KP; ++kp)
    for (int c = 0; c < g.C; ++c)
      for (int r = 0; r < g.R; ++r)
        for (int s = 0; s < g.S; ++s)
          WK[((std::size_t(kp) * g.C + c) * g.R + r) * g.S + s] =
              pair_bits(*g.w(weight, 2 * kp, c, r, s), 2 * kp + 1 < g.K ? *g.w(weight, 2 * kp + 1, c, r, s) : 0.0f);
}

// Output columns a tile: 6, or 4 on narrow planes where 4 divides Q (conv2's Q = 8: two tiles of 4
// instead of 6 + a 2-wide tail whose broadcasts outnumber its dot products; conv1's Q = 28 keeps 6).
template <class F>
inline void q_blocks(int Q, F&& f) {
  if (Q <= 8 && Q % 4 == 0)
    blocks<4>(Q, f);
  else
    blocks<6>(Q, f);
}

// Pool codes (pool4: 0..3 the winner, 4 no gradient) as one byte a sample: a quarter of the fp32 kernel's
// float codes, so the saved state the backward reads back - from memory, a whole forward and backward
// later - is that much smaller.
using u8 = uint8_t;
inline void store_codes(u8* p, R code) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(code))); }
inline R load_codes(const u8* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// PoolEpi (kernels_impl.inc) with byte codes: Yp [K][P/2][Q/2][L] floats, codes [K][P/2][Q/2][L] bytes.
// BF16OUT: the pooled outputs go to Y16 in bf16 (a blocked activation) instead of Yp (a compile-time choice:
// a branch in the epilogue costs the conv1 tile 10%).
template <bool BF16OUT>
struct PoolEpiB {
  float* Yp;
  u8* codes;
  const Geo& g;
  uint16_t* Y16;
  template <int KB, int ROWS, int QB>
  void operator()(R (&acc)[KB][ROWS][QB], int k0, int p0, int q0) {
    static_assert(ROWS == 2);
    const int P2 = g.P / 2, Q2 = g.Q / 2;
    for (int kb = 0; kb < KB; ++kb)
      for (int j = 0; j < QB / 2; ++j) {
        R out, code;
        pool4(acc[kb][0][2 * j], acc[kb][0][2 * j + 1], acc[kb][1][2 * j], acc[kb][1][2 * j + 1], out, code);
        const std::size_t at = ((std::size_t(k0 + kb) * P2 + p0 / 2) * Q2 + q0 / 2 + j) * L;
        if constexpr (BF16OUT)
          storeh(Y16 + at, to_bf16(out));
        else
          V::store(Yp + at, out);
        store_codes(codes + at, code);
      }
  }
};
// saved, per block of L samples: the input X16 [C][Hp][Wp][L] in bf16 (the backward makes its column pairs
// XW again, in cache) then the byte codes: under half the fp32 kernel's X and float codes, so the layer's
// reservation fits and the backward reads back less than half as many bytes.
inline std::size_t saved_block_floats(const Geo& g) { return g.x_floats() / 2 + g.pooled_floats() / 4; }

// ---- forward: conv + bias + ReLU + pool, two rows of outputs a tile ---------------------------------
// Input row p0+rr feeds output row `row` through kernel row rr - row; rows [ROW_LO, ROW_HI) are valid for
// rr, decided at compile time (a runtime row index would put the accumulators on the stack).
// SP weight words a kernel row, each SSTEP input columns apart: 2 for column pairs (XW), 1 for channel
// pairs (XC, where every column is a tap).
template <int KB, int QB, int SP, int SSTEP, int ROW_LO, int ROW_HI>
inline void fwd_rows_bf16(R (&acc)[KB][2][QB], const u32a* xrow, const u32a* wc, std::size_t wk, int rr) {
  for (int sp = 0; sp < SP; ++sp) {
    B x[QB];
    for (int qb = 0; qb < QB; ++qb) x[qb] = loadb(xrow + std::size_t(qb + SSTEP * sp) * L);
    for (int row = ROW_LO; row < ROW_HI; ++row)
      for (int kb = 0; kb < KB; ++kb) {
        const B w = bcastp(wc + kb * wk + (rr - row) * SP + sp);
        for (int qb = 0; qb < QB; ++qb) acc[kb][row][qb] = dp(acc[kb][row][qb], w, x[qb]);
      }
  }
}

// CX channel slots (C for column pairs, C/2 for channel pairs); WF [K][CX][R][SP].
template <int KB, int QB, int SP, int SSTEP, class Epi>
inline void fwd_tile_bf16(const u32a* XW, const u32a* WF, const float* bias, const Geo& g, int CX, int k0, int p0,
                          int q0, Epi& epi) {
  R acc[KB][2][QB];
  for (int kb = 0; kb < KB; ++kb) {
    const R b0 = V::set1(bias ? bias[k0 + kb] : 0.0f);
    for (int row = 0; row < 2; ++row)
      for (int qb = 0; qb < QB; ++qb) acc[kb][row][qb] = b0;
  }
  const std::size_t wk = std::size_t(CX) * g.R * SP, xr = std::size_t(g.Wp) * L;
  for (int c = 0; c < CX; ++c) {
    const u32a* wc = WF + (std::size_t(k0) * CX + c) * g.R * SP;
    const u32a* x0 = XW + ((std::size_t(c) * g.Hp + p0) * g.Wp + q0) * L;
    fwd_rows_bf16<KB, QB, SP, SSTEP, 0, 1>(acc, x0, wc, wk, 0);
    for (int rr = 1; rr < g.R; ++rr) fwd_rows_bf16<KB, QB, SP, SSTEP, 0, 2>(acc, x0 + rr * xr, wc, wk, rr);
    fwd_rows_bf16<KB, QB, SP, SSTEP, 1, 2>(acc, x0 + g.R * xr, wc, wk, g.R);
  }
  epi.template operator()<KB, 2, QB>(acc, k0, p0, q0);
}

template <int SP, int SSTEP>
inline void fwd_pool_bf16(float* Yp, uint16_t* Y16, u8* codes, const u32a* XW, const u32a* WF, const float* bias,
                          const Geo& g, int CX) {
  auto run = [&](auto& epi) {
    for (int p0 = 0; p0 + 2 <= g.P; p0 += 2)
      blocks<Cfg::fwd_kb>(g.K, [&]<int KB>(int k0) {
        q_blocks(g.Q, [&]<int QB>(int q0) { fwd_tile_bf16<KB, QB, SP, SSTEP>(XW, WF, bias, g, CX, k0, p0, q0, epi); });
      });
  };
  if (Y16) {
    PoolEpiB<true> epi{Yp, codes, g, Y16};
    run(epi);
  } else {
    PoolEpiB<false> epi{Yp, codes, g, nullptr};
    run(epi);
  }
}

// saved: saved_block_floats a block of L samples.
std::size_t crp_saved(const Conv2dShape& s) {
  if (!fast_conv(s)) return rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16).conv2d_relu_pool_saved(s);
  const Geo g(s);
  return std::size_t(blocks_of(s.N)) * saved_block_floats(g);
}

// XC [C/2][Hp][Wp][L] channel pairs (x[2cp], x[2cp+1]) from X [C][Hp][Wp][L] fp32 (C even).
inline void make_xc(u32a* XC, const float* X, const Geo& g) {
  const std::size_t plane = std::size_t(g.Hp) * g.Wp * L;
  for (int cp = 0; cp < g.C / 2; ++cp)
    for (std::size_t i = 0; i < plane; i += L)
      storeb(XC + cp * plane + i, interleave(V::load(X + 2 * cp * plane + i), V::load(X + (2 * cp + 1) * plane + i)));
}
// WC [K][C/2][R][S] pairs (w[k][2cp][r][s], w[k][2cp+1][r][s]).
inline void pack_wc(u32a* WC, const float* weight, const Geo& g) {
  for (int k = 0; k < g.K; ++k)
    for (int cp = 0; cp < g.C / 2; ++cp)
      for (int r = 0; r < g.R; ++r)
        for (int s = 0; s < g.S; ++s)
          WC[((std::size_t(k) * (g.C / 2) + cp) * g.R + r) * g.S + s] =
              pair_bits(*g.w(weight, k, 2 * cp, r, s), *g.w(weight, k, 2 * cp + 1, r, s));
}

// ---- forward, one input channel (conv1): pairs of kernel rows -----------------------------------------
// With C = 1 the reduction of an output is just its R x S taps. Column pairs take R * ceil(S/2) dot
// products (15 for 5 x 5: every row's last pair has a zero partner); here kernel rows pair instead -
// (r, r+1) for r = 0, 2, ..., S products each - and an odd last row takes column pairs: R/2 * S +
// ceil(S/2) products (13 for 5 x 5). The row pairs read XR [Hp-1][Wp][L] = (x[h][w], x[h+1][w]), the
// last row XW, the column-pair layout the backward keeps anyway.
// XW [Hp][Wp][L] (x[h][w], x[h][w+1]), XR (x[h][w], x[h+1][w]) and the saved bf16 copy X16 [Hp][Wp][L],
// 0 outside the image, straight from the unpadded staging copy T [H][W][L] of the one channel.
inline void make_pairs_c1(u32a* XW, u32a* XR, uint16_t* X16, const float* T, const Geo& g) {
  auto at = [&](int h, int w) -> R {
    const int hh = h - g.pad, ww = w - g.pad;
    return unsigned(hh) < unsigned(g.H) && unsigned(ww) < unsigned(g.W) ? V::load(T + (std::size_t(hh) * g.W + ww) * L)
                                                                         : V::zero();
  };
  for (int h = 0; h < g.Hp; ++h) {
    u32a* xw = XW + std::size_t(h) * g.Wp * L;
    u32a* xr = XR + std::size_t(h) * g.Wp * L;
    const bool down = h + 1 < g.Hp;
    R cur = at(h, 0);
    for (int w = 0; w < g.Wp; ++w) {
      const R next = at(h, w + 1);
      storeh(X16 + (std::size_t(h) * g.Wp + w) * L, to_bf16(cur));
      storeb(xw + std::size_t(w) * L, interleave(cur, next));
      if (down) storeb(xr + std::size_t(w) * L, interleave(cur, at(h + 1, w)));
      cur = next;
    }
  }
}
// W1 [K][c1_wk(g)]: R/2 * S row pairs (w[k][2rp][s], w[k][2rp+1][s]), then, when R is odd, ceil(S/2)
// column pairs of the last row (w[k][R-1][2sp], w[k][R-1][2sp+1] or 0).
inline std::size_t c1_wk(const Geo& g) { return std::size_t(g.R / 2) * g.S + (g.R % 2 ? (g.S + 1) / 2 : 0); }
inline void pack_w_c1(u32a* W1, const float* weight, const Geo& g) {
  const std::size_t wk = c1_wk(g);
  for (int k = 0; k < g.K; ++k) {
    u32a* o = W1 + std::size_t(k) * wk;
    for (int rp = 0; rp < g.R / 2; ++rp)
      for (int s = 0; s < g.S; ++s) *o++ = pair_bits(*g.w(weight, k, 0, 2 * rp, s), *g.w(weight, k, 0, 2 * rp + 1, s));
    if (g.R % 2)
      for (int sp = 0; sp < (g.S + 1) / 2; ++sp)
        *o++ = pair_bits(*g.w(weight, k, 0, g.R - 1, 2 * sp), 2 * sp + 1 < g.S ? *g.w(weight, k, 0, g.R - 1, 2 * sp + 1) : 0.0f);
  }
}

// One weight word per kb (broadcast), against QB input words of each of the two output rows.
template <int KB, int QB>
inline void c1_step(R (&acc)[KB][2][QB], const u32a* x0, const u32a* x1, const u32a* w, std::size_t wk) {
  B wv[KB];
  for (int kb = 0; kb < KB; ++kb) wv[kb] = bcastp(w + kb * wk);
  B x[QB];
  for (int qb = 0; qb < QB; ++qb) x[qb] = loadb(x0 + std::size_t(qb) * L);
  for (int kb = 0; kb < KB; ++kb)
    for (int qb = 0; qb < QB; ++qb) acc[kb][0][qb] = dp(acc[kb][0][qb], wv[kb], x[qb]);
  for (int qb = 0; qb < QB; ++qb) x[qb] = loadb(x1 + std::size_t(qb) * L);
  for (int kb = 0; kb < KB; ++kb)
    for (int qb = 0; qb < QB; ++qb) acc[kb][1][qb] = dp(acc[kb][1][qb], wv[kb], x[qb]);
}

// Output rows p0, p0+1, channels k0.., columns q0..: row pair rp of output row p0+j reads XR row p0+j+2rp.
// (always inlined: as a call per 12-output tile it measured 30% slower)
template <int KB, int QB, int S, class Epi>
[[gnu::always_inline]] inline void fwd_tile_c1(const u32a* XR, const u32a* XW, const u32a* W1, const float* bias, const Geo& g, int k0,
                        int p0, int q0, Epi& epi) {
  R acc[KB][2][QB];
  for (int kb = 0; kb < KB; ++kb) {
    const R b0 = V::set1(bias ? bias[k0 + kb] : 0.0f);
    for (int row = 0; row < 2; ++row)
      for (int qb = 0; qb < QB; ++qb) acc[kb][row][qb] = b0;
  }
  const std::size_t wk = c1_wk(g), xr = std::size_t(g.Wp) * L;
  const u32a* w = W1 + std::size_t(k0) * wk;
  const u32a* x = XR + (std::size_t(p0) * g.Wp + q0) * L;
  for (int rp = 0; rp < g.R / 2; ++rp, x += 2 * xr, w += S)
    for (int s = 0; s < S; ++s) c1_step<KB, QB>(acc, x + std::size_t(s) * L, x + xr + std::size_t(s) * L, w + s, wk);
  if (g.R % 2) {
    const u32a* xl = XW + (std::size_t(p0 + g.R - 1) * g.Wp + q0) * L;
    for (int sp = 0; sp < (S + 1) / 2; ++sp)
      c1_step<KB, QB>(acc, xl + std::size_t(2 * sp) * L, xl + xr + std::size_t(2 * sp) * L, w + sp, wk);
  }
  epi.template operator()<KB, 2, QB>(acc, k0, p0, q0);
}

// Tiles of 3 channels x 2 rows x 2 columns: 12 accumulators, 7 loads a 12 dot products. Measured (conv1,
// batch 256): 197 us against 254 us for 3 x 2 x 4 and 262 us for 2 x 2 x 6 - g++ spills the 24-accumulator
// tiles here (31 live registers), and the pool epilogue of a small tile costs no more per output.
// One function per (S, output type), the tiles inlined into its loops (noinline: inlined into its caller
// together with its twin, g++ stopped inlining the tiles - a call per tile, 30% slower).
template <int S, bool BF16OUT>
[[gnu::noinline]] void fwd_pool_c1(float* Yp, uint16_t* Y16, u8* codes, const u32a* XR, const u32a* XW,
                                   const u32a* W1, const float* bias, const Geo g) {  // g a copy: the byte code
                                                                                   // stores cannot alias it
  PoolEpiB<BF16OUT> epi{Yp, codes, g, Y16};
  for (int p0 = 0; p0 + 2 <= g.P; p0 += 2)
    blocks<3>(g.K, [&]<int KB>(int k0) {
      blocks<2>(g.Q, [&]<int QB>(int q0) { fwd_tile_c1<KB, QB, S>(XR, XW, W1, bias, g, k0, p0, q0, epi); });
    });
}
template <int S>
void fwd_pool_c1(float* Yp, uint16_t* Y16, u8* codes, const u32a* XR, const u32a* XW, const u32a* W1,
                 const float* bias, const Geo& g) {
  if (Y16)
    fwd_pool_c1<S, true>(Yp, Y16, codes, XR, XW, W1, bias, g);
  else
    fwd_pool_c1<S, false>(Yp, Y16, codes, XR, XW, W1, bias, g);
}

void crp_forward_c1(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                    const Conv2dShape& s) {
  const Geo g(s);
  const std::size_t t_floats = std::size_t(g.H) * g.W * L, xr_words = std::size_t(g.Hp - 1) * g.Wp * L;
  const std::size_t w_words = std::size_t(g.K) * c1_wk(g);
  float* T = thread_scratch(t_floats + xr_words + g.x_floats() + g.pooled_floats() + w_words);
  u32a* XR = reinterpret_cast<u32a*>(T + t_floats);
  u32a* XW = XR + xr_words;
  float* Yp = reinterpret_cast<float*>(XW + g.x_floats());
  u32a* W1 = reinterpret_cast<u32a*>(Yp + g.pooled_floats());
  pack_w_c1(W1, weight, g);
  for (int n0 = 0, b = 0; n0 < s.N; n0 += L, ++b) {
    const int nv = std::min(L, s.N - n0);
    float* blk = saved + std::size_t(b) * saved_block_floats(g);
    uint16_t* X16 = reinterpret_cast<uint16_t*>(blk);
    u8* codes = reinterpret_cast<u8*>(blk + g.x_floats() / 2);
    const std::size_t fi = std::size_t(g.H) * g.W, fo = std::size_t(g.K) * (g.P / 2) * (g.Q / 2);
    if (s.in_blocked) {  // bf16 [H][W][L]: widened (exact) into the staging copy
      const uint16_t* in16 = reinterpret_cast<const uint16_t*>(inp) + std::size_t(n0) * fi;
      for (std::size_t i = 0; i < fi * L; i += L) V::store(T + i, widen(loadh(in16 + i)));
    } else {
      to_blocked(T, inp, n0, nv, fi);
    }
    make_pairs_c1(XW, XR, X16, T, g);
    // Blocked: bf16 in the kernel's own layout, written in place by the epilogue.
    uint16_t* Y16 = s.out_blocked ? reinterpret_cast<uint16_t*>(out) + std::size_t(n0) * fo : nullptr;
    if (g.S == 5)
      fwd_pool_c1<5>(Yp, Y16, codes, XR, XW, W1, bias, g);
    else
      fwd_pool_c1<3>(Yp, Y16, codes, XR, XW, W1, bias, g);
    if (!s.out_blocked) from_blocked(out, Yp, n0, nv, fo);
  }
}

// Even C (conv2): the forward pairs channels - S instructions a kernel row instead of (S+1)/2 column
// pairs with a zero partner in the last (2x rather than 5/3 for S = 5). Odd C pairs columns (XW), C = 1
// kernel rows (crp_forward_c1). The saved state keeps the input in bf16 for the backward's column pairs.
void crp_forward(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                 const Conv2dShape& s) {
  if (any_blocked(s) && !crp_blocked(s))  // (not check(): its message would be allocated on every call)
    throw Error("bf16 conv+ReLU+pool: blocked activations for a shape that cannot take them");
  if (!fast_conv(s))
    return rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16).conv2d_relu_pool_forward(out, saved, inp, weight, bias, s);
  if (s.C == 1) return crp_forward_c1(out, saved, inp, weight, bias, s);
  const Geo g(s);
  const bool chan = g.C % 2 == 0;
  const int SP = (g.S + 1) / 2;
  const std::size_t wf = chan ? std::size_t(g.K) * g.C * g.R * g.S / 2 : std::size_t(g.K) * g.C * g.R * SP;
  const std::size_t xc = chan ? g.x_floats() / 2 : g.x_floats();  // channel pairs XC, or column pairs XW
  float* X = thread_scratch(g.x_floats() + g.tmp_floats() + g.pooled_floats() + wf + xc);
  float* tmp = X + g.x_floats();
  float* Yp = tmp + g.tmp_floats();
  u32a* WF = reinterpret_cast<u32a*>(Yp + g.pooled_floats());
  u32a* XC = WF + wf;
  u32a* XW = XC;
  if (chan)
    pack_wc(WF, weight, g);
  else
    pack_wf(WF, weight, g, SP);
  for (int n0 = 0, b = 0; n0 < s.N; n0 += L, ++b) {
    const int nv = std::min(L, s.N - n0);
    float* blk = saved + std::size_t(b) * saved_block_floats(g);
    uint16_t* X16 = reinterpret_cast<uint16_t*>(blk);
    u8* codes = reinterpret_cast<u8*>(blk + g.x_floats() / 2);
    const std::size_t fo = std::size_t(g.K) * (g.P / 2) * (g.Q / 2);
    uint16_t* Y16 = s.out_blocked ? reinterpret_cast<uint16_t*>(out) + std::size_t(n0) * fo : nullptr;
    if (s.in_blocked) {  // bf16 already: the saved copy is the input (padded), the pairs come from it
      pad_block16(X16, reinterpret_cast<const uint16_t*>(inp) + std::size_t(n0) * g.C * g.H * g.W, g);
      if (chan)
        make_xc16(XC, X16, g);
      else
        make_xw16(XW, X16, g);
    } else {
      to_blocked_input(X, tmp, inp, n0, nv, g);
      make_x16(X16, X, g);
      if (chan)
        make_xc(XC, X, g);
      else
        make_xw(XW, X, g);
    }
    if (chan) {
      if (g.S == 5)
        fwd_pool_bf16<5, 1>(Yp, Y16, codes, XC, WF, bias, g, g.C / 2);
      else
        fwd_pool_bf16<3, 1>(Yp, Y16, codes, XC, WF, bias, g, g.C / 2);
    } else if (SP == 3) {
      fwd_pool_bf16<3, 2>(Yp, Y16, codes, XW, WF, bias, g, g.C);
    } else {
      fwd_pool_bf16<2, 2>(Yp, Y16, codes, XW, WF, bias, g, g.C);
    }
    if (!s.out_blocked) from_blocked(out, Yp, n0, nv, fo);
  }
}

// ---- backward ---------------------------------------------------------------------------------------
// dWl [K][C][R][S][L] += sum_{p, qp} DQ[k][p][qp] . XW[c][p+r][2qp+s], k in the block, one (c, r).
template <int KB, int S>
inline void bwd_weight_tile_bf16(float* dWl, const u32a* DQ, const u32a* XW, const Geo& g, int k0, int c, int r,
                                 int p_lo, int p_hi) {
  R acc[KB][S];
  for (int kb = 0; kb < KB; ++kb)
    for (int s = 0; s < S; ++s) acc[kb][s] = V::zero();
  const int QP = g.Q / 2;
  const std::size_t dk = std::size_t(g.P) * QP * L;
  for (int p = p_lo; p < p_hi; ++p) {
    const u32a* xrow = XW + (std::size_t(c) * g.Hp + p + r) * g.Wp * L;
    const u32a* drow = DQ + (std::size_t(k0) * g.P + p) * QP * L;
    for (int qp = 0; qp < QP; ++qp) {
      B x[S];
      for (int s = 0; s < S; ++s) x[s] = loadb(xrow + std::size_t(2 * qp + s) * L);
      for (int kb = 0; kb < KB; ++kb) {
        const B d = loadb(drow + kb * dk + std::size_t(qp) * L);
        for (int s = 0; s < S; ++s) acc[kb][s] = dp(acc[kb][s], d, x[s]);
      }
    }
  }
  for (int kb = 0; kb < KB; ++kb)
    for (int s = 0; s < S; ++s) {
      float* w = dWl + (((std::size_t(k0 + kb) * g.C + c) * g.R + r) * g.S + s) * L;
      V::store(w, V::add(V::load(w), acc[kb][s]));
    }
}

// Tiles of 4 output channels (20 accumulators for S = 5), or 3 when K divides by 3 and not by 4 (LeNet's
// conv1, K = 6: two 15-accumulator tiles rather than 20 + 10, where 10 chains cannot hide the dot
// product's latency).
// Bands of 4 output rows on wide planes: a band's DQ rows and the input rows under it stay in L1 while every (k, c, r)
// tile passes over them (sweeping all P rows per tile streamed them from L2 once per (k block, c, r),
// which bounded conv1's backward at the fp32 kernel's speed).
template <int S>
inline void bwd_weight_bf16(float* dWl, const u32a* DQ, const u32a* XW, const Geo& g) {
  // (Small planes - conv2's 8 x 8 - fit in L1 whole: one band, so each tile's accumulators are loaded
  // and stored once rather than once a band.)
  const int PB = g.Q >= 16 ? 4 : g.P;
  for (int p0 = 0; p0 < g.P; p0 += PB) {
    const int p1 = std::min(g.P, p0 + PB);
    auto tile = [&]<int KB>(int k0) {
      for (int c = 0; c < g.C; ++c)
        for (int r = 0; r < g.R; ++r) bwd_weight_tile_bf16<KB, S>(dWl, DQ, XW, g, k0, c, r, p0, p1);
    };
    if (g.K % 4 != 0 && g.K % 3 == 0)
      blocks<3>(g.K, tile);
    else
      blocks<Cfg::bwd_weight_kb>(g.K, tile);
  }
}

// DX[c0+cb][h][q0 + j] += sum_{kp, r, s} WK[kp][c][r][s] . DK[kp][h-r][q0+qb], j = qb + s.
template <int CB, int QB, int S>
inline void bwd_data_tile_bf16(float* DX, const u32a* DK, const u32a* WK, const Geo& g, int c0, int h, int q0) {
  constexpr int NA = QB + S - 1;
  R acc[CB][NA];
  for (int cb = 0; cb < CB; ++cb)
    for (int j = 0; j < NA; ++j) acc[cb][j] = V::load(DX + ((std::size_t(c0 + cb) * g.Hp + h) * g.Wp + q0 + j) * L);
  const int r_lo = std::max(0, h - (g.P - 1)), r_hi = std::min(g.R - 1, h);
  const int KP = (g.K + 1) / 2;
  const std::size_t dk = std::size_t(g.P) * g.Q * L, wk = std::size_t(g.C) * g.R * S, wc = std::size_t(g.R) * S;
  for (int r = r_lo; r <= r_hi; ++r) {
    const u32a* drow = DK + (std::size_t(h - r) * g.Q + q0) * L;
    const u32a* wr = WK + (std::size_t(c0) * g.R + r) * S;
    for (int kp = 0; kp < KP; ++kp, drow += dk, wr += wk) {
      B d[QB];
      for (int qb = 0; qb < QB; ++qb) d[qb] = loadb(drow + std::size_t(qb) * L);
      for (int s = 0; s < S; ++s)
        for (int cb = 0; cb < CB; ++cb) {
          const B w = bcastp(wr + cb * wc + s);
          for (int qb = 0; qb < QB; ++qb) acc[cb][qb + s] = dp(acc[cb][qb + s], w, d[qb]);
        }
    }
  }
  for (int cb = 0; cb < CB; ++cb)
    for (int j = 0; j < NA; ++j) V::store(DX + ((std::size_t(c0 + cb) * g.Hp + h) * g.Wp + q0 + j) * L, acc[cb][j]);
}

template <int S>
inline void bwd_data_bf16(float* DX, const u32a* DK, const u32a* WK, const Geo& g) {
  std::memset(DX, 0, g.x_floats() * sizeof(float));
  for (int h = 0; h < g.P + g.R - 1; ++h)
    blocks<Cfg::bwd_data_cb>(g.C, [&]<int CB>(int c0) {
      q_blocks(g.Q, [&]<int QB>(int q0) { bwd_data_tile_bf16<CB, QB, S>(DX, DK, WK, g, c0, h, q0); });
    });
}

// The pooled gradient dP routed to each window's winner (pool codes as in unpool_block), written straight
// into the pair layouts without the unpooled fp32 copy: a window (2 x 2 at 2p2, 2q2) fills DQ[k][2p2][q2]
// with its top pair and DQ[k][2p2+1][q2] with its bottom pair; DK (when not null) pairs channels 2kp, 2kp+1
// at every position. dBl += the gradient that passed (code < 4).
// x rounded to bf16 as core/half.h's round_bf16 rounds it (bit for bit).
inline R round_r(R x) { return V::round_bf16(x); }

// dP is rounded to bf16 as it is read (an operand; dbias sums the rounded values too).
// dP fp32, or bf16 (a blocked gradient, already rounded).
inline R load_d(const float* p) { return round_r(V::load(p)); }
inline R load_d(const uint16_t* p) { return widen(loadh(p)); }
template <class DT>
inline void unpool_pairs(u32a* DQ, u32a* DK, float* dBl, const DT* dP, const u8* codes, const Geo& g) {
  const int P2 = g.P / 2, Q2 = g.Q / 2;
  const R four = V::set1(4.0f), zero = V::zero();
  const R pos[4] = {V::zero(), V::set1(1.0f), V::set1(2.0f), V::set1(3.0f)};
  const std::size_t plane = std::size_t(g.P) * g.Q * L;
  for (int k = 0; k < g.K; ++k) {
    R bias_acc = V::load(dBl + std::size_t(k) * L);
    for (int p = 0; p < P2; ++p)
      for (int q = 0; q < Q2; ++q) {
        const std::size_t at = ((std::size_t(k) * P2 + p) * Q2 + q) * L;
        const R d = load_d(dP + at), code = load_codes(codes + at);
        const R v0 = V::select_eq(code, pos[0], d, zero), v1 = V::select_eq(code, pos[1], d, zero);
        const R v2 = V::select_eq(code, pos[2], d, zero), v3 = V::select_eq(code, pos[3], d, zero);
        storeb(DQ + ((std::size_t(k) * g.P + 2 * p) * Q2 + q) * L, interleave(v0, v1));
        storeb(DQ + ((std::size_t(k) * g.P + 2 * p + 1) * Q2 + q) * L, interleave(v2, v3));
        if (DK) {
          // Channel k is the low (even k) or high (odd k) half of pair k/2: write it as 16-bit halves.
          u32a* dk = DK + std::size_t(k / 2) * plane + ((std::size_t(2 * p) * g.Q) + 2 * q) * L;
          const std::size_t down = std::size_t(g.Q) * L;
          const __mmask32 half = (k & 1) ? 0xAAAAAAAAu : 0x55555555u;
          auto put = [&](u32a* dst, R v) {
            const B b = interleave(v, v);  // both halves hold v; the mask keeps this channel's half
            _mm512_mask_storeu_epi16(dst, half, b);
          };
          put(dk, v0);
          put(dk + L, v1);
          put(dk + down, v2);
          put(dk + down + L, v3);
        }
        bias_acc = V::add(bias_acc, V::select_gt(four, code, d, zero));
      }
    V::store(dBl + std::size_t(k) * L, bias_acc);
  }
  if (DK && (g.K & 1)) {  // the last pair's missing partner channel is zero
    u32a* dk = DK + std::size_t(g.K / 2) * plane;
    for (std::size_t i = 0; i < plane; i += L) _mm512_mask_storeu_epi16(dk + i, 0xAAAAAAAAu, _mm512_setzero_si512());
  }
}

// inp: unread (saved keeps the input's bf16 pair layouts).
void crp_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* saved, const float* inp,
                  const float* weight, const Conv2dShape& s) {
  if (any_blocked(s) && !crp_blocked(s))  // (not check(): its message would be allocated on every call)
    throw Error("bf16 conv+ReLU+pool: blocked activations for a shape that cannot take them");
  if (!fast_conv(s))
    return rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16)
        .conv2d_relu_pool_backward(dinp, dweight, dbias, dout, saved, inp, weight, s);
  const Geo g(s);
  const int KP = (g.K + 1) / 2, QP = g.Q / 2;
  const std::size_t wl = g.w_floats() * L, bl = std::size_t(g.K) * L;
  const std::size_t dq = std::size_t(g.K) * g.P * QP * L, dkn = std::size_t(KP) * g.P * g.Q * L;
  const std::size_t wkn = std::size_t(KP) * g.C * g.R * g.S;
  float* dWl = thread_scratch(wl + bl + g.pooled_floats() + dq + wkn + g.x_floats() +
                              (dinp ? dkn + g.x_floats() + g.tmp_floats() : 0));
  u32a* XW = reinterpret_cast<u32a*>(dWl + wl + bl + g.pooled_floats() + dq + wkn);  // after WK (see below)
  float* dBl = dWl + wl;
  float* dP = dBl + bl;
  u32a* DQ = reinterpret_cast<u32a*>(dP + g.pooled_floats());
  u32a* WK = DQ + dq;
  u32a* DK = XW + g.x_floats();
  float* DX = reinterpret_cast<float*>(DK + (dinp ? dkn : 0));
  float* tmp = DX + g.x_floats();
  std::memset(dWl, 0, (wl + bl) * sizeof(float));
  if (dinp) pack_wk(WK, weight, g);
  for (int n0 = 0, b = 0; n0 < s.N; n0 += L, ++b) {
    const int nv = std::min(L, s.N - n0);
    const float* blk = saved + std::size_t(b) * saved_block_floats(g);
    make_xw16(XW, reinterpret_cast<const uint16_t*>(blk), g);
    const u8* codes = reinterpret_cast<const u8*>(blk + g.x_floats() / 2);
    const std::size_t pooled = std::size_t(g.K) * (g.P / 2) * (g.Q / 2);
    if (s.out_blocked) {  // bf16, blocked
      unpool_pairs(DQ, dinp ? DK : nullptr, dBl, reinterpret_cast<const uint16_t*>(dout) + std::size_t(n0) * pooled, codes, g);
    } else {  // fp32: blocked here, rounded by unpool_pairs
      to_blocked(dP, dout, n0, nv, pooled);
      unpool_pairs(DQ, dinp ? DK : nullptr, dBl, static_cast<const float*>(dP), codes, g);
    }
    if (g.S == 5)
      bwd_weight_bf16<5>(dWl, DQ, XW, g);
    else
      bwd_weight_bf16<3>(dWl, DQ, XW, g);
    if (dinp) {
      const std::size_t fi = std::size_t(g.C) * g.H * g.W;
      if (g.S == 5)
        bwd_data_bf16<5>(DX, DK, WK, g);
      else
        bwd_data_bf16<3>(DX, DK, WK, g);
      if (s.in_blocked)
        unpad_block16(reinterpret_cast<uint16_t*>(dinp) + std::size_t(n0) * fi, DX, g);
      else
        from_blocked_input(dinp, tmp, DX, n0, nv, g);
    }
  }
  reduce_lanes(dweight, dWl, g.w_floats());
  reduce_lanes(dbias, dBl, std::size_t(g.K));
}

// ---- linear: a bf16-pair GEMM ------------------------------------------------------------------------
// C[m][n] (m < MR, n < ncols <= NV*L) = (accumulate ? C[m][n] : bias ? bias[n] : 0)
//                                       + sum_kp A2[m*lda + kp] . B2[kp*ldb + n],
// A2 and B2 pair words; B2 rows are zero beyond N up to ldb (a multiple of L), so only the last vector's
// stores (and accumulating loads) are masked. The linears pass a bias, the convs' panels accumulate
// (zoo_conv_bf16.inc): one micro-kernel for both.
template <int MR, int NV>
inline void gemm_tile_bf16(int KP, const u32a* A, std::size_t lda, const u32a* Bm, std::size_t ldb, float* C,
                           std::size_t ldc, int ncols, const float* bias, bool accumulate = false) {
  const V::M last = V::mask(ncols - (NV - 1) * L);
  R acc[MR][NV];
  if (accumulate) {
    for (int m = 0; m < MR; ++m) {
      for (int v = 0; v < NV - 1; ++v) acc[m][v] = V::load(C + m * ldc + v * L);
      acc[m][NV - 1] = V::load_mask(C + m * ldc + (NV - 1) * L, last);
    }
  } else {
    for (int v = 0; v < NV; ++v) {
      R init = V::zero();
      if (bias) init = v < NV - 1 ? V::load(bias + v * L) : V::load_mask(bias + v * L, last);
      for (int m = 0; m < MR; ++m) acc[m][v] = init;
    }
  }
  for (int kp = 0; kp < KP; ++kp) {
    B b[NV];
    for (int v = 0; v < NV; ++v) b[v] = loadb(Bm + kp * ldb + v * L);
    for (int m = 0; m < MR; ++m) {
      const B a = bcastp(A + m * lda + kp);
      for (int v = 0; v < NV; ++v) acc[m][v] = dp(acc[m][v], a, b[v]);
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int v = 0; v < NV - 1; ++v) V::store(C + m * ldc + v * L, acc[m][v]);
    V::store_mask(C + m * ldc + (NV - 1) * L, acc[m][NV - 1], last);
  }
}

// C [M][N] (+)= (bias row) + A2 [M][KP] . B2 [KP][ldb] (B2 rows zero from N up to ldb, a multiple of L):
// gemm_tile_bf16 over BLIS-style blocks. A sub-panel of B (KC pair rows x up to 48 words) is copied into a
// contiguous 24 KB buffer, which then stays in L1 while every row tile of C goes by (B2's rows, ld words apart -
// often a multiple of 512 bytes - fell into a few L1 sets: conflict misses, B read from L2). The bias (when not
// accumulating) initialises the first panel's tiles. Column blocks are 3 vectors, but 4 remaining vectors go as
// 2 + 2 (a 1-vector tile is broadcast-bound: 8 broadcasts for 8 dot products; the 1x1 maps' 64 columns).
inline void gemm_bf16(int M, int N, int KP, const u32a* A, std::size_t lda, const u32a* Bm, std::size_t ldb, float* C,
                      std::size_t ldc, const float* bias, bool accumulate = false) {
  constexpr int MR = Cfg::gemm_mr, NVB = Cfg::gemm_nv, KC = Cfg::gemm_kc;
  alignas(64) thread_local u32a panel[KC * NVB * L];
  for (int k0 = 0; k0 < std::max(KP, 1); k0 += KC) {
    const int kc = std::min(KC, KP - k0);
    const bool acc = accumulate || k0 > 0;
    for (int n0 = 0; n0 < N;) {
      const int left = (N - n0 + L - 1) / L, nv = left == 4 ? 2 : std::min(NVB, left);
      const int ncols = std::min(nv * L, N - n0);
      // (a B panel read by fewer than 4 row tiles is not worth its copy: mobilenet_v2's 16- and 24-channel convs)
      const bool pack = M >= 4 * MR;
      if (pack)
        for (int k = 0; k < kc; ++k)
          for (int v = 0; v < nv; ++v) storeb(panel + (k * nv + v) * L, loadb(Bm + (k0 + k) * ldb + n0 + v * L));
      auto rows = [&]<int NV>() {
        const u32a* b = pack ? panel : Bm + k0 * ldb + n0;
        const std::size_t ldp = pack ? NV * L : ldb;
        const float* bias_n = !acc && bias ? bias + n0 : nullptr;
        blocks<MR>(M, [&]<int MRT>(int m0) {
          gemm_tile_bf16<MRT, NV>(kc, A + m0 * lda + k0, lda, b, ldp, C + m0 * ldc + n0, ldc, ncols, bias_n, acc);
        });
      };
      if (nv == 3) rows.template operator()<3>();
      else if (nv == 2) rows.template operator()<2>();
      else rows.template operator()<1>();
      n0 += nv * L;
    }
  }
}

// Rows of pairs along the columns: dst[m][kp] = (src[m][2kp], src[m][2kp+1]) (0 past K), m < M.
inline void pack_row_pairs(u32a* dst, const float* src, int M, int K, std::size_t lds) {
  const int KP = (K + 1) / 2;
  for (int m = 0; m < M; ++m) {
    const float* s = src + m * lds;
    u32a* d = dst + std::size_t(m) * KP;
    int kp = 0;
    for (; 2 * kp + 32 <= K; kp += 16) {  // 32 consecutive floats -> 16 pair words, in order
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(V::load(s + 2 * kp + 16), V::load(s + 2 * kp));
      storeb(d + kp, both);
    }
    for (; kp < KP; ++kp) d[kp] = pair_bits(s[2 * kp], 2 * kp + 1 < K ? s[2 * kp + 1] : 0.0f);
  }
}
// Pairs of rows: dst[kp][n] = (src[2kp][n], src[2kp+1][n]) (0 past K rows and past N up to ldd).
inline void pack_rows_interleaved(u32a* dst, std::size_t ldd, const float* src, int K, int N, std::size_t lds) {
  const int KP = (K + 1) / 2;
  for (int kp = 0; kp < KP; ++kp) {
    const float* a = src + std::size_t(2 * kp) * lds;
    const float* b = 2 * kp + 1 < K ? a + lds : nullptr;
    u32a* d = dst + kp * ldd;
    for (int n0 = 0; n0 < int(ldd); n0 += L) {
      const int nc = std::max(0, std::min(L, N - n0));
      const V::M m = V::mask(nc);
      storeb(d + n0, interleave(V::load_mask(a + n0, m), b ? V::load_mask(b + n0, m) : V::zero()));
    }
  }
}
// dst [cols][ldd] <- the 32-bit words of src [rows][cols] transposed (16 x 16 register tiles; bits kept).
inline void transpose_words(u32a* dst, std::size_t ldd, const u32a* src, int rows, int cols) {
  const float* s = reinterpret_cast<const float*>(src);
  float* d = reinterpret_cast<float*>(dst);
  int r0 = 0;
  for (; r0 + L <= rows; r0 += L) {
    int c0 = 0;
    for (; c0 + L <= cols; c0 += L) V::transpose(s + std::size_t(r0) * cols + c0, cols, d + std::size_t(c0) * ldd + r0, ldd);
    for (int c = c0; c < cols; ++c)
      for (int r = r0; r < r0 + L; ++r) dst[std::size_t(c) * ldd + r] = src[std::size_t(r) * cols + c];
  }
  for (int r = r0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) dst[std::size_t(c) * ldd + r] = src[std::size_t(r) * cols + c];
}
// Transposed pairs: dst[kp][n] = (src[n][2kp], src[n][2kp+1]) for n < N (0 past N up to ldd); tmp holds
// N * ceil(K/2) words.
inline void pack_cols_pairs(u32a* dst, std::size_t ldd, const float* src, int N, int K, std::size_t lds, u32a* tmp) {
  const int KP = (K + 1) / 2;
  pack_row_pairs(tmp, src, N, K, lds);  // [N][KP]
  transpose_words(dst, ldd, tmp, N, KP);
  for (int kp = 0; kp < KP; ++kp)
    for (std::size_t n = N; n < ldd; ++n) dst[kp * ldd + n] = 0;
}

// The GEMM on pair words that the conv passes below (zoo_conv_bf16.inc) run: vdpbf16ps tiles (dp_gemm there)
// or AMX tiles (gemm_bf16_amx.h), same operands and contract (C (+)= A . B, with an optional bias row).
using PairGemm = void (*)(int M, int N, int KP, const void* A, std::size_t lda, const void* B, std::size_t ldb,
                          float* C, std::size_t ldc, const float* bias, bool accumulate);

void lin_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearShape& s) {
  const int IP = (s.I + 1) / 2, ld = round_up(s.O, L);
  float* sc = thread_scratch(std::size_t(s.N) * IP + std::size_t(IP) * ld + std::size_t(s.O) * IP);
  u32a* A = reinterpret_cast<u32a*>(sc);
  u32a* Bm = A + std::size_t(s.N) * IP;
  u32a* tmp = Bm + std::size_t(IP) * ld;
  pack_row_pairs(A, inp, s.N, s.I, s.I);
  pack_cols_pairs(Bm, ld, weight, s.O, s.I, s.I, tmp);  // B[ip][o] = (w[o][2ip], w[o][2ip+1])
  gemm_bf16(s.N, s.O, IP, A, IP, Bm, ld, out, s.O, bias);
}

// dout is the operand of all three products: each packing rounds it (vcvtne2ps2bf16, whose results are
// round_bf16's but for subnormals, which it flushes: the same pair words as packing a rounded copy).
// dinp [N][I] = dout [N][O] . weight [O][I]: pairs along O.
void lin_backward_data(float* dinp, const float* dout, const float* weight, const LinearShape& s) {
  const int OP = (s.O + 1) / 2, ldi = round_up(s.I, L);
  const std::size_t nA = std::size_t(s.N) * OP, nB = std::size_t(OP) * ldi;
  float* sc = thread_scratch(nA + nB);
  u32a* A = reinterpret_cast<u32a*>(sc);
  u32a* Bm = A + nA;
  pack_row_pairs(A, dout, s.N, s.O, s.O);
  pack_rows_interleaved(Bm, ldi, weight, s.O, s.I, s.I);
  gemm_bf16(s.N, s.I, OP, A, OP, Bm, ldi, dinp, s.I, nullptr);
}

// dweight [O][I] = dout^T . inp: pairs along N; dbias[o] the sum over n, in order, of the rounded dout.
void lin_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const LinearShape& s) {
  const int NP = (s.N + 1) / 2, ldi = round_up(s.I, L), ldo = round_up(s.O, L);
  const std::size_t nT = std::size_t(NP) * ldo, nA = std::size_t(ldo) * NP, nB = std::size_t(NP) * ldi;
  float* sc = thread_scratch(nT + nA + nB);
  u32a* tmp = reinterpret_cast<u32a*>(sc);
  u32a* A = tmp + nT;
  u32a* Bm = A + nA;
  // A[o][np] = (dout[2np][o], dout[2np+1][o]): row pairs of dout [NP][O], transposed
  pack_rows_interleaved(tmp, ldo, dout, s.N, s.O, s.O);
  transpose_words(A, NP, tmp, NP, ldo);  // rows o >= O of the transpose are never read
  pack_rows_interleaved(Bm, ldi, inp, s.N, s.I, s.I);
  gemm_bf16(s.O, s.I, NP, A, NP, Bm, ldi, dweight, s.I, nullptr);
  if (dbias) {  // dout read row by row
    std::memset(dbias, 0, sizeof(float) * s.O);
    for (int n = 0; n < s.N; ++n)
      for (int o0 = 0; o0 < s.O; o0 += L) {
        const V::M m = V::mask(std::min(L, s.O - o0));
        const R d = round_r(V::load_mask(dout + std::size_t(n) * s.O + o0, m));
        V::store_mask(dbias + o0, V::add(V::load_mask(dbias + o0, m), d), m);
      }
  }
}

void lin_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                  const LinearShape& s) {
  if (dinp) lin_backward_data(dinp, dout, weight, s);
  lin_backward_weight(dweight, dbias, dout, inp, s);
}

// ---- vit's split sums (ops/kernels.h: linear_forward_chunked, linear_backward_data_chunked) ----------
// Each chunk's partial is the pair GEMM above from zero over the chunk's own features (pairs within the chunk,
// a zero partner past an odd chunk's end), whatever the other chunks; the partials are then summed in the
// pairwise tree of nn/tp_reduction.cpp and the bias added. The same operands and sums as that file's
// composition of linear_forward calls on copies (tests/test_chunked_linear.cpp: the same bits), without the
// copies and with the tree in vectors.
// out = the tree over parts [chunks][n] (+ bias, O floats a row); parts is overwritten.
inline void tree_sum_rows(float* out, float* parts, int chunks, std::size_t n, const float* bias, int O) {
  auto add_into = [n](float* a, const float* b) {
    std::size_t i = 0;
    for (; i + L <= n; i += L) V::store(a + i, V::add(V::load(a + i), V::load(b + i)));
    for (; i < n; ++i) a[i] += b[i];
  };
  for (int stride = 1; stride < chunks; stride *= 2)  // ((p0 + p1) + (p2 + p3)) for 4, ((p0 + p1) + p2) for 3
    for (int c = 0; c + stride < chunks; c += 2 * stride) add_into(parts + std::size_t(c) * n, parts + std::size_t(c + stride) * n);
  const std::size_t rows = n / std::size_t(O);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* p = parts + r * O;
    float* o = out + r * O;
    for (int c = 0; c < O; c += L) {
      const V::M m = V::mask(std::min(L, O - c));
      const R v = V::load_mask(p + c, m);
      V::store_mask(o + c, bias ? V::add(v, V::load_mask(bias + c, m)) : v, m);
    }
  }
}

void lin_forward_chunked(float* out, const float* inp, const float* weight, const float* bias, const LinearShape& s,
                         int chunks) {
  const int Ic = s.I / chunks, IcP = (Ic + 1) / 2, ld = round_up(s.O, L);
  const std::size_t n = std::size_t(s.N) * s.O, nA = std::size_t(s.N) * IcP, nB = std::size_t(IcP) * ld,
                    nT = std::size_t(s.O) * IcP;
  float* sc = thread_scratch(nA + nB + nT + n * chunks);
  u32a* A = reinterpret_cast<u32a*>(sc);
  u32a* Bm = A + nA;
  u32a* tmp = Bm + nB;
  float* parts = sc + nA + nB + nT;
  for (int c = 0; c < chunks; ++c) {
    pack_row_pairs(A, inp + std::size_t(c) * Ic, s.N, Ic, s.I);
    pack_cols_pairs(Bm, ld, weight + std::size_t(c) * Ic, s.O, Ic, s.I, tmp);
    gemm_bf16(s.N, s.O, IcP, A, IcP, Bm, ld, parts + std::size_t(c) * n, s.O, nullptr);
  }
  tree_sum_rows(out, parts, chunks, n, bias, s.O);
}

// Chunk c's features: `groups` blocks of `block`, group g's at g O/groups + c block (vit: one head's q, k, v),
// summed in that order: a block's pairs accumulate onto the previous block's partial. (The composition pairs
// the blocks laid end to end: the same pairs where blocks are of even width, as vit's 32-feature heads.)
void lin_backward_data_chunked(float* dinp, const float* dout, const float* weight, const LinearShape& s, int chunks,
                               int groups) {
  const int per_group = s.O / groups, block = per_group / chunks, BP = (block + 1) / 2, ldi = round_up(s.I, L);
  const std::size_t n = std::size_t(s.N) * s.I, nA = std::size_t(s.N) * BP, nB = std::size_t(BP) * ldi;
  float* sc = thread_scratch(nA + nB + n * chunks);
  u32a* A = reinterpret_cast<u32a*>(sc);
  u32a* Bm = A + nA;
  float* parts = sc + nA + nB;
  for (int c = 0; c < chunks; ++c)
    for (int g = 0; g < groups; ++g) {
      const std::size_t from = std::size_t(g) * per_group + std::size_t(c) * block;
      pack_row_pairs(A, dout + from, s.N, block, s.O);
      pack_rows_interleaved(Bm, ldi, weight + from * s.I, block, s.I, s.I);
      gemm_bf16(s.N, s.I, BP, A, BP, Bm, ldi, parts + std::size_t(c) * n, s.I, nullptr, g > 0);
    }
  tree_sum_rows(dinp, parts, chunks, n, nullptr, s.I);
}

// The zoo's general and pointwise convolutions: im2col into bf16 pairs + the GEMM tile above.
#include "ringtrain/ops/cpu/zoo_conv_bf16.inc"

#pragma GCC diagnostic pop

}  // namespace

void fill_bf16_avx512(KernelTable& t) {
  static_cast<void>(&fill);  // the fp32 table of this file's copy of kernels_impl.inc is not needed
  t = rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16);  // fallback entries (non-fused conv)
  t.level = IsaLevel::Avx512;
  t.conv2d_relu_pool_saved = crp_saved;
  t.conv2d_relu_pool_forward = crp_forward;
  t.conv2d_relu_pool_backward = crp_backward;
  t.conv2d_relu_pool_blocked = crp_blocked;
  t.conv2d_relu_pool_block = L;
  t.conv2d_relu_pool_block_bf16 = true;
  t.linear_forward = lin_forward;
  t.linear_backward = lin_backward;
  t.linear_forward_chunked = lin_forward_chunked;
  t.linear_backward_data_chunked = lin_backward_data_chunked;
  t.conv2d_forward = zoo_bf16::conv_forward;
  t.conv2d_backward_data = zoo_bf16::conv_backward_data;
  t.conv2d_backward_weight = zoo_bf16::conv_backward_weight;
  // vit's attention core: this build's fp32 kernel, rounding q, k, v and dout as it loads them (same bits
  // as the composition's rounded copies)
  t.attention_forward = attention_forward;
  t.attention_backward = attention_backward;
}

void fill_bf16_amx(KernelTable& t) {
  fill_bf16_avx512(t);
  // LeNet's fused conv + ReLU + pool (samples in the lanes, no GEMM): the CPUs with AMX (Intel Xeons) issue
  // vdpbf16ps at half their FMA rate (bench_peak: 123 against 247 GFLOP/s), so the fp32 kernels on rounded
  // operands beat the vdpbf16ps tiles there (LeNet-5 bf16, batch 256: 0.98x fp32 against 0.61x; BENCHMARKS.md).
  const KernelTable& rounding = rounding_kernels_for(IsaLevel::Avx512, Precision::Bf16);
  t.conv2d_relu_pool_saved = rounding.conv2d_relu_pool_saved;
  t.conv2d_relu_pool_forward = rounding.conv2d_relu_pool_forward;
  t.conv2d_relu_pool_backward = rounding.conv2d_relu_pool_backward;
  t.conv2d_relu_pool_blocked = rounding.conv2d_relu_pool_blocked;
  t.conv2d_relu_pool_block = rounding.conv2d_relu_pool_block;
  t.conv2d_relu_pool_block_bf16 = rounding.conv2d_relu_pool_block_bf16;
  t.linear_forward = amx_linear_forward;
  t.linear_backward = amx_linear_backward;
  t.linear_forward_chunked = amx_linear_forward_chunked;
  t.linear_backward_data_chunked = amx_linear_backward_data_chunked;
  t.conv2d_forward = zoo_bf16::amx_conv_forward;
  t.conv2d_backward_data = zoo_bf16::amx_conv_backward_data;
  t.conv2d_backward_weight = zoo_bf16::amx_conv_backward_weight;
}

}  // namespace ringtrain::ops::cpu
