// The AVX2+FMA (16 ymm registers: 8-12-accumulator tiles) build of every op: kernels_impl.inc instantiated with this ISA's vector type and block sizes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ringtrain/ops/cpu/simd_avx2.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/tables.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecAvx2;
// Register-block sizes (outputs per tile): see docs/KERNELS.md for how they were chosen.
struct Cfg {
  static constexpr int fwd_kb = 3, fwd_qb = 2, bwd_data_cb = 2, bwd_data_qb = 2, bwd_weight_kb = 2, bwd_weight_qb = 1, gemm_mr = 6, gemm_nv = 2, gemm_kc = 256, conv_mr = 4, conv_nv = 3, ig_mr = 6, ig_nv = 2, ig_tc = 256;
};

#include "ringtrain/ops/cpu/kernels_impl.inc"

}  // namespace

void fill_avx2(KernelTable& table) { fill(table); }

}  // namespace ringtrain::ops::cpu
