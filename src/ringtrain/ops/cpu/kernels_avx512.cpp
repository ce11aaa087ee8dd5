// The AVX-512 (32 zmm registers: 24-accumulator tiles) build of every op: kernels_impl.inc instantiated with this ISA's vector type and block sizes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ringtrain/core/error.h"
#include "ringtrain/ops/cpu/simd_avx512.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/tables.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecAvx512;
// Register-block sizes (outputs per tile): see docs/KERNELS.md for how they were chosen.
struct Cfg {
  static constexpr int fwd_kb = 2, fwd_qb = 6, bwd_data_cb = 2, bwd_data_qb = 6, bwd_weight_kb = 4, bwd_weight_qb = 6, gemm_mr = 8, gemm_nv = 3, gemm_kc = 128, gemm_mr_narrow = 12, gemm_nv_narrow = 2, ig_mr = 12, ig_nv = 2, ig_tc = 256;
};

#include "ringtrain/ops/cpu/kernels_impl.inc"

}  // namespace

void fill_avx512(KernelTable& table) { fill(table); }

}  // namespace ringtrain::ops::cpu
