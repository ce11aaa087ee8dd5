// The zoo's convolutions in bf16 as implicit GEMMs on AMX tiles (zoo_conv_amx.h), on the driver of
// amx_tiles.h. The im2col route (zoo_conv_bf16.inc) spent two thirds of a pass writing and reading its
// column matrix (short runs of 1-7 pixels); here each tile row is one 64-byte copy:
//   Xh [N][Hp][Wp][Cp]  the input in bf16, channels last, zero-padded (Hp = H + 2 pad, Cp = C rounded up to
//                       32, a tile row); pixel (n, p, q) at tap (r, s) reads row (n, p st + r, q st + s).
//   forward          C [m][k] = sum over live taps t and channel pairs of Xh[pixel m at t] . W pairs
//                    (M = N P Q output pixels; A tiles gathered a row a pixel, B the weight's pair words
//                    packed once into tiles); C is then transposed 16 x 16 into NCHW, the bias added.
//   backward-data    stride 1: the forward of dout (padding R - 1 - pad) with the flipped, transposed weight,
//                    read in place through a strided view (no flipped copy).
//   backward-weight  C [k][t, c] = sum over pixel pairs of dout^T . Xh (A: dout's channel rows in bf16, pairs
//                    of consecutive pixels; B tiles gathered from Xh, two pixels' 16 channels interleaved a row).
// Pointwise convs take two shortcuts: on planes of >= 32 pixels, GEMMs on each sample's NCHW planes (no copy,
// no transpose); on 1x1 maps, where NCHW is [N][C], the linears of linear_amx.h.
// Taps that only ever read padding (3x3 convs on 1x1 maps) are skipped. Operands are rounded to bf16
// (vcvtne*ps2bf16: nearest even, subnormals flushed), products exact, sums fp32: the bf16 tables' semantics.
#include "ringtrain/ops/cpu/zoo_conv_amx.h"

#include "ringtrain/core/aligned.h"
#include "ringtrain/ops/cpu/amx_pack.h"
#include "ringtrain/ops/cpu/conv_as_linear.h"
#include "ringtrain/ops/cpu/linear_amx.h"

// g++ 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized flags (as in
// simd_avx512.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ringtrain::ops::cpu {
namespace {

using namespace amx;

constexpr int kMaxTaps = 64;

// The geometry: the live taps and the channels-last copy's extents (in bf16 values).
struct Geo {
  int N, C, H, W, K, R, S, st, pad, P, Q, PQ, M, Hp, Wp, Cp;
  int ntaps = 0, tr[kMaxTaps], ts[kMaxTaps];
  explicit Geo(const Conv2dShape& s)
      : N(s.N), C(s.C), H(s.H), W(s.W), K(s.K), R(s.R), S(s.S), st(s.stride), pad(s.pad), P(s.P()), Q(s.Q()),
        PQ(P * Q), M(N * PQ), Hp(H + 2 * pad), Wp(W + 2 * pad), Cp(round_up(C, 2 * kTile)) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < S; ++c)
        if (live(r, P, H) && live(c, Q, W) && ntaps < kMaxTaps) tr[ntaps] = r, ts[ntaps++] = c;
  }
  // Whether kernel row (or column) r reads an input row for some output row p < P of an input of n rows.
  bool live(int r, int outputs, int n) const {
    for (int p = 0; p < outputs; ++p)
      if (p * st + r - pad >= 0 && p * st + r - pad < n) return true;
    return false;
  }
  // Offsets in Xh (bf16 values): output pixel m's tap-(0, 0) position, tap t's displacement.
  int base(int m) const {
    const int n = m / PQ, p = (m % PQ) / Q, q = m % Q;
    return ((n * Hp + p * st) * Wp + q * st) * Cp;
  }
  int tap(int t) const { return (tr[t] * Wp + ts[t]) * Cp; }
  std::size_t xh_size() const { return std::size_t(N) * Hp * Wp * Cp; }
};

// The weight as the GEMM's B: w(kout, cin, r, s) at w + kout sk + cin sc + the tap (flipped: (R-1-r, S-1-s)).
struct WeightView {
  const float* w;
  int sk, sc;
  bool flip;
  const float* at(int kout, int cin, int r, int s, const Geo& g) const {
    const int tap = flip ? (g.R - 1 - r) * g.S + (g.S - 1 - s) : r * g.S + s;
    return w + std::size_t(kout) * sk + std::size_t(cin) * sc + tap;
  }
};

// Per-thread scratch by slot; grows on the first step only.
template <class T>
T* scratch(int slot, std::size_t n) {
  thread_local AlignedBuffer<float> buf[4];  // slots 0-3
  const std::size_t floats = (n * sizeof(T) + sizeof(float) - 1) / sizeof(float);
  if (buf[slot].size() < floats) buf[slot].resize(floats + floats / 4);
  return reinterpret_cast<T*>(buf[slot].data());
}

inline R widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// Xh <- x (NCHW fp32), 16 channels x 16 pixels at a time through a register transpose.
void to_channels_last(uint16_t* xh, const float* x, const Geo& g) {
  std::memset(xh, 0, sizeof(uint16_t) * g.xh_size());
  const int HW = g.H * g.W;
  for (int n = 0; n < g.N; ++n)
    for (int c0 = 0; c0 < g.C; c0 += kTile)
      for (int i0 = 0; i0 < HW; i0 += kTile) {
        const int np = std::min(kTile, HW - i0);
        R r[kTile];
        for (int j = 0; j < kTile; ++j)
          r[j] = c0 + j < g.C ? _mm512_maskz_loadu_ps(first(np), x + (std::size_t(n) * g.C + c0 + j) * HW + i0)
                              : _mm512_setzero_ps();
        VecAvx512::transpose_regs(r);  // r[i]: pixel i0 + i, channels c0 ..
        for (int i = 0; i < np; ++i) {
          const int h = (i0 + i) / g.W, w = (i0 + i) % g.W;
          uint16_t* d = xh + ((std::size_t(n) * g.Hp + h + g.pad) * g.Wp + w + g.pad) * g.Cp + c0;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), (__m256i)_mm512_cvtneps_pbh(r[i]));
        }
      }
}

// The forward (and, through a flipped view, backward-data) GEMM: out [N][K][P][Q] = conv(x, w) + bias.
void forward_with(float* out, const float* x, const WeightView& wv, const float* bias, const Geo& g) {
  const int CW = g.Cp / 2, KP = g.ntaps * CW, ldk = round_up(g.K, kTile), ksteps = KP / kTile;
  uint16_t* xh = scratch<uint16_t>(0, g.xh_size());
  int* base = scratch<int>(1, round_up(g.M, kTile));
  uint32_t* bw = scratch<uint32_t>(2, std::size_t(ldk) * KP);
  float* ct = scratch<float>(3, std::size_t(round_up(g.M, kTile)) * ldk);
  to_channels_last(xh, x, g);
  for (int m = 0; m < g.M; ++m) base[m] = g.base(m);
  // B tiles: slab j (output channels 16 j ..), step (t, 16 channel pairs), row = pair, 16 output channels.
  const __m512i lanes = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(wv.sk));
  for (int j = 0; j < ldk / kTile; ++j) {
    const __mmask16 mk = first(g.K - j * kTile);
    for (int t = 0; t < g.ntaps; ++t)
      for (int cw = 0; cw < CW; ++cw) {
        const int c = 2 * cw;
        R a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
        if (c < g.C) a = _mm512_mask_i32gather_ps(a, mk, lanes, wv.at(j * kTile, c, g.tr[t], g.ts[t], g), 4);
        if (c + 1 < g.C) b = _mm512_mask_i32gather_ps(b, mk, lanes, wv.at(j * kTile, c + 1, g.tr[t], g.ts[t], g), 4);
        const int k = t * CW + cw;  // the reduction index
        _mm512_store_si512(bw + (std::size_t(j) * ksteps + k / kTile) * kTileWords + (k % kTile) * kTile, pair_words(a, b));
      }
  }
  const auto* xw = reinterpret_cast<const uint32_t*>(xh);  // pair words: Cp is even
  run({g.M, g.K, ct, std::size_t(ldk), nullptr, false}, KP,
      [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
        const int steps = kc / kTile;  // KP is a multiple of 16: whole steps, each inside one tap
        for (int sl = 0; sl < slabs; ++sl)
          for (int r = 0; r < kTile; ++r) {
            const int m = m0 + sl * kTile + r;
            uint32_t* d = dst + std::size_t(sl) * steps * kTileWords + r * kTile;
            for (int st = 0; st < steps; ++st, d += kTileWords) {
              if (m >= g.M) {
                _mm512_store_si512(d, _mm512_setzero_si512());
                continue;
              }
              const int k = k0 + st * kTile, t = k / CW;
              _mm512_store_si512(d, _mm512_loadu_si512(xw + (base[m] + g.tap(t)) / 2 + k % CW));
            }
          }
      },
      [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
        const int steps = kc / kTile;
        for (int sl = 0; sl < slabs; ++sl)
          std::memcpy(dst + std::size_t(sl) * steps * kTileWords,
                      bw + (std::size_t(n0 / kTile + sl) * ksteps + k0 / kTile) * kTileWords,
                      sizeof(uint32_t) * steps * kTileWords);
      });
  // ct [M][ldk] -> out [N][K][PQ], 16 pixels x 16 channels at a time; a run of 16 pixels inside one sample is
  // one store a channel, otherwise a scatter.
  for (int m0 = 0; m0 < g.M; m0 += kTile) {
    const int np = std::min(kTile, g.M - m0), n = m0 / g.PQ, pq = m0 % g.PQ;
    const bool run_in_sample = pq + np <= g.PQ;
    alignas(64) int idx[kTile];
    for (int i = 0; i < kTile; ++i) {
      const int m = std::min(m0 + i, g.M - 1);
      idx[i] = (m / g.PQ) * g.K * g.PQ + m % g.PQ;
    }
    const __m512i vidx = _mm512_load_si512(idx);
    for (int k0 = 0; k0 < g.K; k0 += kTile) {
      R r[kTile];
      for (int i = 0; i < kTile; ++i) r[i] = _mm512_loadu_ps(ct + std::size_t(m0 + i) * ldk + k0);
      VecAvx512::transpose_regs(r);  // r[kk]: channel k0 + kk over the 16 pixels
      for (int kk = 0; kk < std::min(kTile, g.K - k0); ++kk) {
        const int k = k0 + kk;
        const R v = bias ? _mm512_add_ps(r[kk], _mm512_set1_ps(bias[k])) : r[kk];
        if (run_in_sample)
          _mm512_mask_storeu_ps(out + (std::size_t(n) * g.K + k) * g.PQ + pq, first(np), v);
        else
          _mm512_mask_i32scatter_ps(out, first(np), _mm512_add_epi32(vidx, _mm512_set1_epi32(k * g.PQ)), v, 4);
      }
    }
  }
}

// Pointwise convs on planes of 32 pixels or more (mobilenet_v2's 14x14 and 7x7 1x1 layers): GEMMs on each
// sample's NCHW planes, no channels-last copy and no output transpose (a C tile is 16 channels x 16 pixels
// of the plane):
//   forward          out_n [K][PQ] = W [K][C] . x_n [C][PQ]     A = W's rows, B = pairs of x_n's planes
//   backward-data    dinp_n [C][PQ] = W^T . dout_n              A = W's row pairs transposed, B = dout_n's
//   backward-weight  dW [K][C] += dout_n [K][PQ] . x_n^T          A = dout_n's planes (pixel pairs), B = x_n's
//                                                                 planes transposed; samples summed in order
bool pointwise(const Conv2dShape& s) { return s.R == 1 && s.S == 1 && s.stride == 1 && s.pad == 0; }
bool planar(const Conv2dShape& s) { return pointwise(s) && s.H * s.W >= 2 * kTile; }

void planar_forward(float* out, const float* x, const float* w, const float* bias, const Conv2dShape& s) {
  const int PQ = s.H * s.W;
  for (int n = 0; n < s.N; ++n) {
    const float* xn = x + std::size_t(n) * s.C * PQ;
    float* yn = out + std::size_t(n) * s.K * PQ;
    run({s.K, PQ, yn, std::size_t(PQ), nullptr, false}, (s.C + 1) / 2,
        [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
          pack_rows(dst, [&](int k, int col) { return w + std::size_t(k) * s.C + col; }, s.K, s.C, m0, slabs, k0, kc);
        },
        [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
          pack_row_pairs(dst, [&](int c) { return xn + std::size_t(c) * PQ; }, s.C, PQ, n0, slabs, k0, kc);
        });
    if (bias)
      for (int k = 0; k < s.K; ++k)
        for (int i = 0; i < PQ; ++i) yn[std::size_t(k) * PQ + i] += bias[k];
  }
}

void planar_backward_data(float* dinp, const float* dout, const float* w, const Conv2dShape& s) {
  const int PQ = s.H * s.W;
  for (int n = 0; n < s.N; ++n) {
    const float* dn = dout + std::size_t(n) * s.K * PQ;
    run({s.C, PQ, dinp + std::size_t(n) * s.C * PQ, std::size_t(PQ), nullptr, false}, (s.K + 1) / 2,
        [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
          pack_row_pairs_transposed(dst, [&](int k) { return w + std::size_t(k) * s.C; }, s.K, s.C, m0, slabs, k0, kc,
                                    nullptr);
        },
        [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
          pack_row_pairs(dst, [&](int k) { return dn + std::size_t(k) * PQ; }, s.K, PQ, n0, slabs, k0, kc);
        });
  }
}

void planar_backward_weight(float* dweight, float* dbias, const float* dout, const float* x, const Conv2dShape& s) {
  const int PQ = s.H * s.W;
  for (int n = 0; n < s.N; ++n) {
    const float* dn = dout + std::size_t(n) * s.K * PQ;
    const float* xn = x + std::size_t(n) * s.C * PQ;
    run({s.K, s.C, dweight, std::size_t(s.C), nullptr, n > 0}, (PQ + 1) / 2,
        [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
          pack_rows(dst, [&](int k, int col) { return dn + std::size_t(k) * PQ + col; }, s.K, PQ, m0, slabs, k0, kc);
        },
        [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
          pack_rows_transposed(dst, [&](int c, int col) { return xn + std::size_t(c) * PQ + col; }, s.C, PQ, n0, slabs,
                               k0, kc);
        });
  }
  if (dbias)  // the sum of the rounded dout, sample by sample
    for (int k = 0; k < s.K; ++k) {
      R acc = _mm512_setzero_ps();
      for (int n = 0; n < s.N; ++n) {
        const float* d = dout + (std::size_t(n) * s.K + k) * PQ;
        for (int i = 0; i < PQ; i += kTile) acc = _mm512_add_ps(acc, round_r(_mm512_maskz_loadu_ps(first(PQ - i), d + i)));
      }
      dbias[k] = _mm512_reduce_add_ps(acc);
    }
}

Conv2dShape data_as_forward(const Conv2dShape& s) {
  Conv2dShape t = s;
  t.C = s.K, t.K = s.C, t.H = s.P(), t.W = s.Q(), t.pad = s.R - 1 - s.pad, t.stride = 1;
  return t;
}

}  // namespace

bool amx_conv_ok(const Conv2dShape& s) {
  return s.groups == 1 && s.C >= 16 && s.stride <= 4 && s.R * s.S <= kMaxTaps && !s.in_blocked && !s.out_blocked;
}
bool amx_conv_data_ok(const Conv2dShape& s) {
  return s.stride == 1 && s.R == s.S && s.pad <= s.R - 1 && amx_conv_ok(s) && amx_conv_ok(data_as_forward(s));
}

void amx_conv_forward(float* out, const float* inp, const float* weight, const float* bias, const Conv2dShape& s) {
  if (conv_on_1x1_maps(s)) return amx_linear_forward(out, inp, weight, bias, as_linear(s));
  if (planar(s)) return planar_forward(out, inp, weight, bias, s);
  const Geo g(s);
  forward_with(out, inp, {weight, s.C * s.R * s.S, s.R * s.S, false}, bias, g);
}

void amx_conv_backward_data(float* dinp, const float* dout, const float* weight, const Conv2dShape& s) {
  if (conv_on_1x1_maps(s)) return amx_linear_backward_data(dinp, dout, weight, as_linear(s));
  if (planar(s)) return planar_backward_data(dinp, dout, weight, s);
  // dinp[c][h][w] = sum over k, r, s of W[k][c][R-1-r][S-1-s] dout[k][h - (R-1-pad) + r][w - (S-1-pad) + s]:
  // the forward on dout with output channels c, input channels k.
  const Geo g(data_as_forward(s));
  forward_with(dinp, dout, {weight, s.R * s.S, s.C * s.R * s.S, true}, nullptr, g);
}

void amx_conv_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const Conv2dShape& s) {
  if (conv_on_1x1_maps(s)) return amx_linear_backward_weight(dweight, dbias, dout, inp, as_linear(s));
  if (planar(s)) return planar_backward_weight(dweight, dbias, dout, inp, s);
  const Geo g(s);
  const int JP = (g.M + 1) / 2, C16 = round_up(g.C, kTile), NC = g.ntaps * C16;
  uint16_t* xh = scratch<uint16_t>(0, g.xh_size());
  int* base = scratch<int>(1, 2 * JP);
  uint16_t* dt = scratch<uint16_t>(2, std::size_t(g.K) * 2 * JP);  // dout^T [K][2 JP] in bf16
  float* cw = scratch<float>(3, std::size_t(g.K) * NC);
  to_channels_last(xh, inp, g);
  for (int m = 0; m < g.M; ++m) base[m] = g.base(m);
  for (int k = 0; k < g.K; ++k) {
    uint16_t* row = dt + std::size_t(k) * 2 * JP;
    for (int n = 0; n < g.N; ++n) {
      const float* src = dout + (std::size_t(n) * g.K + k) * g.PQ;
      for (int i = 0; i < g.PQ; i += kTile)
        _mm256_mask_storeu_epi16(row + n * g.PQ + i, first(g.PQ - i),
                                 (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(first(g.PQ - i), src + i)));
    }
    if (g.M % 2) row[g.M] = 0;
  }
  run({g.K, NC, cw, std::size_t(NC), nullptr, false}, JP,
      [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
        pack_rows_a(dst, reinterpret_cast<const uint32_t*>(dt), JP, g.K, m0, slabs, k0, kc);
      },
      [&](uint32_t* dst, int n0, int slabs, int k0, int kc) {
        const int steps = (kc + kTile - 1) / kTile;
        for (int sl = 0; sl < slabs; ++sl) {
          const int col = n0 + sl * kTile, t = col / C16, c0 = col % C16;
          const int tap = g.tap(t) + c0;
          for (int st = 0; st < steps; ++st)
            for (int r = 0; r < kTile; ++r) {
              const int jp = k0 + st * kTile + r, m = 2 * jp;
              __m512i v = _mm512_setzero_si512();
              if (jp < k0 + kc && m < g.M) {
                const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + base[m] + tap));
                const __m256i b = m + 1 < g.M ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + base[m + 1] + tap))
                                              : _mm256_setzero_si256();
                v = pair_words(a, b);
              }
              _mm512_store_si512(dst + (std::size_t(sl) * steps + st) * kTileWords + r * kTile, v);
            }
        }
      });
  // cw [K][t, c] -> dweight [K][C][R][S] (16 channels a scatter; taps that read only padding get 0), an output
  // channel's row at a time: its zeros and its taps land while the row is in L1 (zeroing the whole gradient
  // first, then scattering, took a second trip to memory for resnet18's 9.4 MB layer4 weights).
  const int RS = g.R * g.S;
  const __m512i lanes = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(RS));
  for (int k = 0; k < g.K; ++k) {
    if (g.ntaps < RS) std::memset(dweight + std::size_t(k) * g.C * RS, 0, sizeof(float) * g.C * RS);
    for (int t = 0; t < g.ntaps; ++t)
      for (int c0 = 0; c0 < g.C; c0 += kTile)
        _mm512_mask_i32scatter_ps(dweight + (std::size_t(k) * g.C + c0) * RS + g.tr[t] * g.S + g.ts[t], first(g.C - c0),
                                  lanes, _mm512_loadu_ps(cw + std::size_t(k) * NC + t * C16 + c0), 4);
  }
  if (dbias)  // the sum of the rounded dout
    for (int k = 0; k < g.K; ++k) {
      const uint16_t* row = dt + std::size_t(k) * 2 * JP;
      R acc = _mm512_setzero_ps();
      for (int i = 0; i < g.M; i += kTile)
        acc = _mm512_add_ps(acc, widen(_mm256_maskz_loadu_epi16(first(g.M - i), row + i)));
      dbias[k] = _mm512_reduce_add_ps(acc);
    }
}

}  // namespace ringtrain::ops::cpu

#pragma GCC diagnostic pop
