// Entry points of the bf16 builds (kernels_bf16_avx512.cpp, kernels_bf16_avx2.cpp), used by ops/ref/lowp.cpp only.
#pragma once
#include "ringtrain/ops/kernels.h"

namespace ringtrain::ops::cpu {

// The fp32 AVX-512 table with the fused conv+ReLU+pool and linear passes replaced by vdpbf16ps kernels.
// Call only where cpu_has_avx512_bf16().
void fill_bf16_avx512(KernelTable& table);
// fill_bf16_avx512's table with the linears and the zoo's GEMM-shaped convs on AMX tiles (gemm_bf16_amx.h).
// Call only where amx_bf16_usable().
void fill_bf16_amx(KernelTable& table);
// The AVX2 rounding composition with the zoo's depthwise and implicit-GEMM conv passes rounding their operands
// as they copy them (same bits). Call only where the CPU runs AVX2.
void fill_bf16_avx2(KernelTable& table);

}  // namespace ringtrain::ops::cpu
