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

}  // namespace ringtrain::ops::cpu
