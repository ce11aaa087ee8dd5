// Fused conv2d + bias + ReLU + 2x2 max-pool (window 2, stride 2): LeNet's convolution blocks as one op.
//   out [N,K,P/2,Q/2] = maxpool2(relu(conv2d(inp, weight) + bias))   (Conv2dShape as in conv2d.h)
// Requires P and Q even. The forward leaves kernel-private state in `saved` (the input in the kernel's
// own layout, unless the input already is that layout, and which window element won, per output) for the
// backward, which also gets the forward's input `inp` (the same tensor, unchanged) and writes
//   dweight, dbias (overwritten) and, when dinp is not null, dinp [N,C,H,W] (overwritten).
// Pooling ties go to the first maximum in row-major window order and a window whose maximum is <= 0
// passes no gradient: exactly relu_backward(maxpool2d_backward(dout)) of the unfused reference ops.
// There is no reference kernel of its own: the oracle is the composition of ref:: conv2d, relu and
// maxpool2d (tests/test_kernels.cpp), which nn::Conv2dReluPool also runs when a table has no fused entry.
//
// Blocked activations: a table whose conv2d_relu_pool_blocked(s) is true for a shape also takes s.in_blocked /
// s.out_blocked there: that tensor (and its gradient) is [N/B][features][B], B = the table's
// conv2d_relu_pool_block samples side by side - the kernels' own layout - so two fused layers in a row
// (LeNet's conv1 -> conv2) hand their activation over without transposing it out and back
// (nn::Conv2dReluPool::chain_to). The fp32 tables (B = their vector width: 8 AVX2, 16 AVX-512, 1 scalar) keep
// fp32 values; the bf16 AVX-512 table (B = 16, KernelTable::conv2d_relu_pool_block_bf16) keeps bf16 words in the
// first half of the float buffer, the rounding every consumer applies anyway, at half the bytes; the bf16 AVX2
// table (B = 8) keeps that rounding as fp32 values, written rounded so its reader takes them in place. The
// layers' results (outputs of the last, parameter gradients) are the same bits as with the [N][features] fp32
// tensor; a bf16 table's blocked tensor itself holds the bf16 rounding of the fp32 one.
#pragma once
#include <cstddef>

#include "ringtrain/ops/conv2d.h"

namespace ringtrain::ops {

inline bool conv_relu_pool_fusable(const Conv2dShape& s) { return s.P() % 2 == 0 && s.Q() % 2 == 0; }

}  // namespace ringtrain::ops
