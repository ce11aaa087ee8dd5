// The zoo's convolutions in bf16 as implicit GEMMs on AMX tiles (zoo_conv_amx.cpp): no im2col matrix; the
// tiles are gathered 64 bytes a row from a channels-last bf16 copy of the input (pointwise convs: GEMMs on
// the NCHW planes, or on 1x1 maps the linears). Semantics of the bf16 tables
// (lowp.h): operands rounded to bf16, exact products, fp32 sums, fp32 results. Call only where
// amx_bf16_usable(), for shapes where amx_conv_ok().
#pragma once
#include "ringtrain/ops/conv2d.h"

namespace ringtrain::ops::cpu {

// Groups 1, at least 16 input channels (a tile row holds 32: fewer would be mostly zeros; the 1-channel
// stems keep the im2col path), stride up to 4, at most 64 kernel taps.
bool amx_conv_ok(const Conv2dShape& s);
// Backward-data runs as a forward convolution of dout (stride 1, pad <= R - 1, square kernels).
bool amx_conv_data_ok(const Conv2dShape& s);

void amx_conv_forward(float* out, const float* inp, const float* weight, const float* bias, const Conv2dShape& s);
void amx_conv_backward_data(float* dinp, const float* dout, const float* weight, const Conv2dShape& s);
void amx_conv_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp, const Conv2dShape& s);

}  // namespace ringtrain::ops::cpu
