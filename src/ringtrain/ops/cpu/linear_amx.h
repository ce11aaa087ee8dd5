// The bf16 linear passes on AMX tiles (linear_amx.cpp), reading the fp32 operands straight into tiles (the
// rounding to bf16 fused into the packing; no pair-word copies of the activations or weights in between).
// Semantics of the bf16 tables (lowp.h): operands rounded to bf16 (vcvtne*ps2bf16), exact products, fp32
// sums; dbias sums the rounded dout. Call only where amx_bf16_usable().
#pragma once
#include "ringtrain/ops/linear.h"

namespace ringtrain::ops::cpu {

void amx_linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearShape& s);
void amx_linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, const LinearShape& s);
// Its two halves (the convolutions on 1x1 maps are linears: zoo_conv_amx.cpp).
void amx_linear_backward_data(float* dinp, const float* dout, const float* weight, const LinearShape& s);
void amx_linear_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const LinearShape& s);
// vit's split sums (ops/kernels.h): each chunk a GEMM over its columns read in place, the chunks' pairwise
// tree ((c0 + c1) + (c2 + c3)), the bias last, as nn/tp_reduction.cpp composes them from linear_forward.
void amx_linear_forward_chunked(float* out, const float* inp, const float* weight, const float* bias,
                                const LinearShape& s, int chunks);
void amx_linear_backward_data_chunked(float* dinp, const float* dout, const float* weight, const LinearShape& s,
                                      int chunks, int groups);

}  // namespace ringtrain::ops::cpu
