// bf16 on AVX2 (no 16-bit dot product on such CPUs, nor at level avx2 anywhere): the fp32 AVX2 kernels with
// each operand rounded to bf16 where the kernel already copies it into its own layout (Cfg::round_operands,
// kernels_impl.inc): the depthwise lanes, the implicit GEMM's weight panels, padded inputs and transposed
// gradients, the im2col matrices and per-sample plane copies of the GEMM paths, LeNet's blocked copies and its
// conv1 -> conv2 hand-over. Same values as rounding whole tensors first and running the fp32 kernels
// (ops/ref/lowp.cpp, the composition this table falls back to for every other pass), without that pass over
// memory each time an operand is read. Products and sums fp32, as there.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/half.h"
#include "ringtrain/ops/cpu/bf16_tables.h"
#include "ringtrain/ops/cpu/blocks_avx2.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/simd_avx2.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecAvx2;
// The fp32 AVX2 build's block sizes (blocks_avx2.h), plus the rounding of copied operands.
struct Cfg : Avx2Blocks {
  // dst <- src rounded (dst == src: in place), nearest even with round_bf16's integer rounding (core/half.h; NaN
  // quiet); a tail through round_bf16. Inline here, not core/half's out-of-line bulk call: that call inside to_lanes
  // changed GCC's inlining of the depthwise passes' transposes (1.5x slower).
  static void round_operands(float* dst, const float* src, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_loadu_ps(src + i);
      const __m256i u = _mm256_castps_si256(x);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
      const __m256i h = _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    if (i < n) round_bf16(dst + i, src + i, n - i);
  }
};

#include "ringtrain/ops/cpu/kernels_impl.inc"

const KernelTable& composed() { return rounding_kernels_for(IsaLevel::Avx2, Precision::Bf16); }

// A rounded copy of x [n] in this thread's rounding buffer `slot` (ops/lowp.h: 0 weights, 1 activations or
// gradients), for this table's own kernels only (the composition would round into the same buffers).
const float* rounded(int slot, const float* x, std::size_t n) { return rounded_copy(Precision::Bf16, slot, x, n); }

// The depthwise kernels round the planes they move into the lanes; their weight (C x R x S floats) is rounded here.
const float* rounded_weight(const float* w, const Conv2dShape& s) {
  return rounded(0, w, std::size_t(s.K) * s.Cg() * s.R * s.S);
}
bool depthwise(const Conv2dShape& s) { return zoo::conv_path(s) == zoo::ConvPath::Depthwise; }
bool legacy(const Conv2dShape& s) { return zoo::conv_path(s) == zoo::ConvPath::Legacy; }

// Depthwise with the weight rounded here; LeNet's unfused shapes (the blocked kernels, which copy nothing they
// could round) through the composition; every other conv through the zoo's routing, whose kernels all round.
void conv_forward(float* out, const float* inp, const float* weight, const float* bias, const Conv2dShape& s) {
  if (depthwise(s)) return zoo::depthwise_forward(out, inp, rounded_weight(weight, s), bias, s);
  if (legacy(s)) return composed().conv2d_forward(out, inp, weight, bias, s);
  zoo::conv_forward(out, inp, weight, bias, s);
}
void conv_backward_data(float* dinp, const float* dout, const float* weight, const Conv2dShape& s) {
  if (depthwise(s)) return zoo::depthwise_backward_data(dinp, dout, rounded_weight(weight, s), s);
  if (legacy(s)) return composed().conv2d_backward_data(dinp, dout, weight, s);
  zoo::conv_backward_data(dinp, dout, weight, s);
}
void conv_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const Conv2dShape& s) {
  if (depthwise(s)) return zoo::depthwise_backward_weight(dweight, dbias, dout, inp, s);
  if (legacy(s)) return composed().conv2d_backward_weight(dweight, dbias, dout, inp, s);
  zoo::conv_backward_weight(dweight, dbias, dout, inp, s);
}

// vit's split sums (nn/tp_reduction.h): this build's fused fp32 passes (kernels_impl.inc) on rounded operands. The
// composition they replace rounded the same values chunk by chunk, ran one linear_forward a chunk on copies and
// added the parts in a further pass: the same chains and tree, so the same bits (tests/test_chunked_linear.cpp).
// That way vit's split linears ran at 0.70-0.87x of fp32's speed on Zen 3; this way they take fp32's time plus
// one rounding pass over each operand.
void linear_forward_chunked_bf16(float* out, const float* inp, const float* weight, const float* bias,
                                 const LinearShape& s, int chunks) {
  linear_forward_chunked(out, rounded(1, inp, std::size_t(s.N) * s.I), rounded(0, weight, std::size_t(s.O) * s.I),
                         bias, s, chunks);
}
void linear_backward_data_chunked_bf16(float* dinp, const float* dout, const float* weight, const LinearShape& s,
                                       int chunks, int groups) {
  linear_backward_data_chunked(dinp, rounded(1, dout, std::size_t(s.N) * s.O),
                               rounded(0, weight, std::size_t(s.O) * s.I), s, chunks, groups);
}

}  // namespace

void fill_bf16_avx2(KernelTable& t) {
  static_cast<void>(&fill);  // the fp32 table of this file's copy of kernels_impl.inc is not needed
  t = rounding_kernels_for(IsaLevel::Avx2, Precision::Bf16);
  // LeNet's fused convs: this build's, rounding the input and the incoming gradient as they transpose them into
  // the lanes, and handing the activation between conv1 and conv2 over blocked, rounded where it is written
  // (kernels_impl.inc). The composition rounded whole tensors in passes of their own and handed over plain.
  t.conv2d_relu_pool_saved = conv2d_relu_pool_saved;
  t.conv2d_relu_pool_forward = conv2d_relu_pool_forward;
  t.conv2d_relu_pool_backward = conv2d_relu_pool_backward;
  t.conv2d_relu_pool_blocked = conv2d_relu_pool_blocked;
  t.conv2d_relu_pool_block = L;
  t.linear_forward = linear_forward;  // the weight rounded as it is packed, the input in a copy
  t.conv2d_forward = conv_forward;
  t.conv2d_backward_data = conv_backward_data;
  t.conv2d_backward_weight = conv_backward_weight;
  t.attention_forward = attention_forward;  // rounding q, k, v and dout as it loads them (zoo_nn_impl.inc)
  t.attention_backward = attention_backward;
  t.linear_forward_chunked = linear_forward_chunked_bf16;
  t.linear_backward_data_chunked = linear_backward_data_chunked_bf16;
}

}  // namespace ringtrain::ops::cpu
