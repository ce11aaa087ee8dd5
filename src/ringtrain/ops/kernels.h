// The kernel table: one function pointer per op pass, filled once at start-up for an ISA level.
// Layers call ops only through a KernelTable, never a specific implementation, so the reference,
// scalar, AVX2 and AVX-512 builds are interchangeable (and tests can run every one of them).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/adam.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/conv_pool.h"
#include "ringtrain/ops/linear.h"
#include "ringtrain/ops/loss.h"
#include "ringtrain/ops/pool.h"
#include "ringtrain/ops/zoo_nn.h"

namespace ringtrain::ops {

// Ordered from the plainest to the fastest.
enum class IsaLevel { Ref, Scalar, Avx2, Avx512 };

const char* isa_name(IsaLevel level);
// Parses "ref|scalar|avx2|avx512"; throws Error naming the bad value.
IsaLevel parse_isa(const std::string& name);

struct KernelTable {
  IsaLevel level = IsaLevel::Ref;
  void (*conv2d_forward)(float* out, const float* inp, const float* weight, const float* bias,
                         const Conv2dShape& s) = nullptr;
  void (*conv2d_backward_data)(float* dinp, const float* dout, const float* weight, const Conv2dShape& s) = nullptr;
  void (*conv2d_backward_weight)(float* dweight, float* dbias, const float* dout, const float* inp,
                                 const Conv2dShape& s) = nullptr;
  // Fused conv + bias + ReLU + 2x2 max-pool (conv_pool.h). Null in the reference table: nn::Conv2dReluPool
  // then composes conv2d, relu and maxpool2d itself. `saved` holds conv2d_relu_pool_saved(s) floats.
  std::size_t (*conv2d_relu_pool_saved)(const Conv2dShape& s) = nullptr;
  void (*conv2d_relu_pool_forward)(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                                   const Conv2dShape& s) = nullptr;
  void (*conv2d_relu_pool_backward)(float* dinp, float* dweight, float* dbias, const float* dout, const float* saved,
                                    const float* inp, const float* weight, const Conv2dShape& s) = nullptr;
  // Whether the fused passes take Conv2dShape::in_blocked / out_blocked for shape s (conv_pool.h: blocked
  // activations; N a whole number of blocks among the conditions). Null: never.
  bool (*conv2d_relu_pool_blocked)(const Conv2dShape& s) = nullptr;
  int conv2d_relu_pool_block = 0;  // samples a block of that layout (0 where conv2d_relu_pool_blocked is null)
  bool conv2d_relu_pool_block_bf16 = false;  // its values bf16 words in the first half of the buffer (else fp32)
  void (*maxpool2d_forward)(float* out, uint8_t* argmax, const float* inp, const PoolShape& s) = nullptr;
  void (*maxpool2d_backward)(float* dinp, const float* dout, const uint8_t* argmax, const PoolShape& s) = nullptr;
  void (*relu_forward)(float* out, const float* inp, int64_t n) = nullptr;
  void (*relu_backward)(float* dinp, const float* dout, const float* out, int64_t n) = nullptr;
  void (*linear_forward)(float* out, const float* inp, const float* weight, const float* bias,
                         const LinearShape& s) = nullptr;
  void (*linear_backward)(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const LinearShape& s) = nullptr;
  // vit's split sums (nn/tp_reduction.h: the sums --tp cuts, in one fixed order), fused into one GEMM pass:
  // out [N, O] = the pairwise tree ((c0 + c1) + (c2 + c3)) over `chunks` equal blocks of the I input features of
  // inp[:, block] weight[:, block]^T, then + bias (nullable). Each chunk's partial is one FMA chain from zero over
  // its features in order, whatever the other chunks, so a rank holding some chunks computes them bit for bit as
  // one process does (the bf16 tables: one dot-product chain over the chunk's feature pairs; AVX2's: the fp32
  // passes on rounded operands). Null (reference table, the other tables rounding into fp32 kernels):
  // tp_reduction composes linear_forward calls instead.
  void (*linear_forward_chunked)(float* out, const float* inp, const float* weight, const float* bias,
                                 const LinearShape& s, int chunks) = nullptr;
  // dinp [N, I] = the same tree over chunks of dout[:, cols(c)] weight[cols(c), :], the O outputs being `groups`
  // equal groups of `chunks` blocks and chunk c the c-th block of every group (vit's packed q | k | v: 3 groups).
  void (*linear_backward_data_chunked)(float* dinp, const float* dout, const float* weight, const LinearShape& s,
                                       int chunks, int groups) = nullptr;
  static constexpr int kMaxChunkSegments = 8;  // groups linear_backward_data_chunked takes at most
  float (*softmax_xent_forward)(float* probs, const float* logits, const uint8_t* labels, int N, int K) = nullptr;
  void (*softmax_xent_backward)(float* dlogits, const float* probs, const uint8_t* labels, int N, int K,
                                float scale) = nullptr;
  // Adam update of n floats (adam.h); bit-identical at every level.
  void (*adam_step)(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamStep& a) = nullptr;

  // ---- the zoo's convolution and pooling ops (general conv, depthwise, pooling) ----
  // Global average pooling (pool.h): out [NC] = mean of each plane of inp [NC][HW]; backward overwrites dinp.
  void (*avgpool_global_forward)(float* out, const float* inp, int64_t NC, int HW) = nullptr;
  void (*avgpool_global_backward)(float* dinp, const float* dout, int64_t NC, int HW) = nullptr;

  // ---- end of the zoo's convolution and pooling ops ----



  // ---- the zoo's normalisation, activation and Transformer ops ----
  // Batch norm 2d over [N, C, H*W] (batch_norm.h): training (batch statistics; updates the running ones when
  // not null) and eval (running statistics) forward, and their backward passes; s.act fuses a following
  // ReLU / ReLU6, whose output y backward then reads (null without one).
  void (*batch_norm_forward_train)(float* out, float* save_mean, float* save_invstd, float* running_mean,
                                   float* running_var, const float* x, const float* gamma, const float* beta,
                                   const BatchNormShape& s, double eps, double momentum) = nullptr;
  void (*batch_norm_forward_eval)(float* out, const float* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, const BatchNormShape& s,
                                  double eps) = nullptr;
  void (*batch_norm_backward_train)(float* dx, float* dgamma, float* dbeta, const float* dout, const float* y,
                                    const float* x, const float* gamma, const float* save_mean,
                                    const float* save_invstd, const BatchNormShape& s) = nullptr;
  void (*batch_norm_backward_eval)(float* dx, float* dgamma, float* dbeta, const float* dout, const float* y,
                                   const float* x, const float* gamma, const float* running_mean,
                                   const float* running_var, const BatchNormShape& s, double eps) = nullptr;
  // ReLU6 and exact GELU (pointwise.h); ReLU6's backward reads the output, GELU's the input.
  void (*relu6_forward)(float* out, const float* inp, int64_t n) = nullptr;
  void (*relu6_backward)(float* dinp, const float* dout, const float* out, int64_t n) = nullptr;
  void (*gelu_forward)(float* out, const float* inp, int64_t n) = nullptr;
  // GELU's backward reads its input and its forward's output: the fast kernels take Phi(x) = out / x from
  // it (one reciprocal) instead of a second erfc; the reference ignores out.
  void (*gelu_backward)(float* dinp, const float* dout, const float* inp, const float* out, int64_t n) = nullptr;
  // Residual add and dropout (elementwise.h); dropout's backward is the same call on dout.
  void (*add_forward)(float* out, const float* a, const float* b, int64_t n) = nullptr;
  void (*dropout_forward)(float* out, const float* x, const DropoutShape& s) = nullptr;
  // Per-sample transpose [rows][cols] -> [cols][rows] of N samples (elementwise.h; vit's patch tokens).
  void (*transpose_samples)(float* dst, const float* src, int N, int rows, int cols) = nullptr;
  // Layer norm over the last dimension (layer_norm.h).
  void (*layer_norm_forward)(float* out, float* save_mean, float* save_rstd, const float* x, const float* weight,
                             const float* bias, const LayerNormShape& s, double eps) = nullptr;
  void (*layer_norm_backward)(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                              const float* weight, const float* save_mean, const float* save_rstd,
                              const LayerNormShape& s) = nullptr;
  // Multi-head self-attention core on PyTorch's packed qkv (attention.h).
  void (*attention_forward)(float* out, float* probs, const float* qkv, const AttentionShape& s) = nullptr;
  void (*attention_backward)(float* dqkv, const float* dout, const float* qkv, const float* probs,
                             const AttentionShape& s) = nullptr;

  // ---- end of the zoo's normalisation, activation and Transformer ops ----
};

// The reference kernels (always available).
const KernelTable& reference_kernels();
// The best level this CPU supports.
IsaLevel detect_isa();
// Levels this CPU can run, plainest first.
std::vector<IsaLevel> supported_isas();
// The table for a level; throws Error if the CPU cannot run it.
const KernelTable& kernels_for(IsaLevel level);
// The level chosen at start-up: RINGTRAIN_ISA if set, else detect_isa().
IsaLevel default_isa();

}  // namespace ringtrain::ops
