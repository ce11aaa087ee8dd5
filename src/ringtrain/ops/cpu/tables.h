// Entry points of the per-ISA kernel builds (ops/cpu/kernels_*.cpp), used by ops/kernels.cpp only.
#pragma once
#include "ringtrain/ops/kernels.h"

namespace ringtrain::ops::cpu {

void fill_scalar(KernelTable& table);
void fill_avx2(KernelTable& table);
void fill_avx512(KernelTable& table);

}  // namespace ringtrain::ops::cpu
