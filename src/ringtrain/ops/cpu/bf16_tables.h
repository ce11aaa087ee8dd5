// Entry point of the AVX512_BF16 build (kernels_bf16_avx512.cpp), used by ops/ref/lowp.cpp only.
#pragma once
#include "ringtrain/ops/kernels.h"

namespace ringtrain::ops::cpu {

// The fp32 AVX-512 table with the fused conv+ReLU+pool and linear passes replaced by vdpbf16ps kernels.
// Call only where cpu_has_avx512_bf16().
void fill_bf16_avx512(KernelTable& table);

}  // namespace ringtrain::ops::cpu
