// Pointwise convs on 1x1 maps (mobilenet_v2's last blocks): NCHW is then [N][C], so the conv is the linear of
// x [N][C] and W [K][C]. The bf16 tables (vdpbf16ps and AMX) run these convs as their linears.
#pragma once
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/linear.h"

namespace ringtrain::ops::cpu {

inline bool conv_on_1x1_maps(const Conv2dShape& s) {
  return s.H == 1 && s.W == 1 && s.R == 1 && s.S == 1 && s.stride == 1 && s.pad == 0 && s.groups == 1 &&
         !s.in_blocked && !s.out_blocked;
}
inline LinearShape as_linear(const Conv2dShape& s) { return {s.N, s.C, s.K}; }

// Convs whose output is one pixel that reads every input pixel (P = Q = 1, pad + H <= R, pad + W <= S):
// resnet18's layer4 on 28x28 digits (3x3 convs with padding 1 on 1x1 maps, the stride-2 one from 2x2 maps).
// NCHW x is then [N][C H W] and the conv is the linear of x and the live taps W[k][c][h + pad][w + pad]
// laid out [K][C H W]. The bf16 tables run them so (zoo_conv_bf16.inc: window_linear).
inline bool conv_on_whole_window(const Conv2dShape& s) {
  return s.groups == 1 && !s.in_blocked && !s.out_blocked && s.H + 2 * s.pad >= s.R && s.W + 2 * s.pad >= s.S &&
         s.P() == 1 && s.Q() == 1 && s.pad + s.H <= s.R && s.pad + s.W <= s.S;
}
inline LinearShape window_as_linear(const Conv2dShape& s) { return {s.N, s.C * s.H * s.W, s.K}; }

}  // namespace ringtrain::ops::cpu
