// The bf16 pair-word GEMM of gemm_bf16_amx.h on AMX tiles: the driver of amx_tiles.h with packers that copy
// row-major A and B into tiles. Compiled with -mamx-tile -mamx-bf16 (the name *_amx.cpp gives the flags);
// nothing here runs unless amx_bf16_usable().
#include "ringtrain/ops/cpu/gemm_bf16_amx.h"

#include "ringtrain/ops/cpu/amx_tiles.h"

// g++ 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized flags (as in
// simd_avx512.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ringtrain::ops::cpu {

using namespace amx;

void gemm_bf16_amx(int M, int N, int KP, const void* A, std::size_t lda, const void* B, std::size_t ldb, float* C,
                   std::size_t ldc, const float* bias, bool accumulate) {
  const auto* a = static_cast<const uint32_t*>(A);
  const auto* b = static_cast<const uint32_t*>(B);
  run({M, N, C, ldc, bias, accumulate}, KP, [&](uint32_t* dst, int m0, int slabs, int k0, int kc) {
    pack_rows_a(dst, a, lda, M, m0, slabs, k0, kc);
  }, [&](uint32_t* dst, int n0, int slabs, int k0, int kc) { pack_rows_b(dst, b, ldb, n0, slabs, k0, kc); });
}

}  // namespace ringtrain::ops::cpu

#pragma GCC diagnostic pop
