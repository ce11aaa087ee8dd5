// The bf16 pair-word GEMM on AMX tiles (tdpbf16ps: a 16 x 16 fp32 tile += a 16 x 32 bf16 tile times a
// 32 x 16 bf16 tile, 16K flops an instruction). Same operands as the vdpbf16ps GEMM of
// kernels_bf16_avx512.cpp, so the linear and conv passes there run on either:
//   C [M][N] = (accumulate ? C : bias row, or 0) + sum over kp < KP of A [m][kp] . B [kp][n]
// A's row m (lda words apart) holds the pair words (a[m][2kp], a[m][2kp+1]); B's row kp (ldb words apart)
// holds (b[2kp][n], b[2kp+1][n]) for n < ldb, ldb a multiple of 16 and >= N (words past N are read but
// only reach columns that are not stored). Each pair word is two bf16 values, the first in the low half.
// Products are exact in fp32 and summed in fp32; results fp32. Call only where amx_bf16_usable().
#pragma once
#include <cstddef>

namespace ringtrain::ops::cpu {

void gemm_bf16_amx(int M, int N, int KP, const void* A, std::size_t lda, const void* B, std::size_t ldb, float* C,
                   std::size_t ldc, const float* bias, bool accumulate);

}  // namespace ringtrain::ops::cpu
