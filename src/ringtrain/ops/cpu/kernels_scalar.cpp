// The scalar (x86-64 baseline; the same blocked algorithms with one lane) build of every op: kernels_impl.inc instantiated with this ISA's vector type and block sizes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ringtrain/core/error.h"
#include "ringtrain/ops/cpu/simd_scalar.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/tables.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecScalar;
// Register-block sizes (outputs per tile): see docs/KERNELS.md for how they were chosen.
struct Cfg {
  static constexpr int fwd_kb = 2, fwd_qb = 2, bwd_data_cb = 1, bwd_data_qb = 4, bwd_weight_kb = 1, bwd_weight_qb = 4, gemm_mr = 4, gemm_nv = 2, gemm_kc = 256;
};

#include "ringtrain/ops/cpu/kernels_impl.inc"

}  // namespace

void fill_scalar(KernelTable& table) { fill(table); }

}  // namespace ringtrain::ops::cpu
