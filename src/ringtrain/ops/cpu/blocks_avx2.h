// The AVX2 builds' register-block sizes (outputs per tile), one list for both: kernels_avx2.cpp and
// kernels_bf16_avx2.cpp, which runs the same fp32 tiles on operands rounded to bf16. docs/KERNELS.md says how they
// were chosen (LeNet-5's conv tiles: "Why the AVX2 tiles are shaped so").
#pragma once

namespace ringtrain::ops::cpu {

struct Avx2Blocks {
  static constexpr int fwd_kb = 3, fwd_qb = 2, bwd_data_cb = 2, bwd_data_qb = 2, bwd_weight_kb = 2, bwd_weight_qb = 1,
                       gemm_mr = 6, gemm_nv = 2, gemm_kc = 256, conv_mr = 4, conv_nv = 3, ig_mr = 6, ig_nv = 2,
                       ig_tc = 256;
};

}  // namespace ringtrain::ops::cpu
