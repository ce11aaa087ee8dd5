// The AVX2+FMA (16 ymm registers: 8-12-accumulator tiles) build of every op: kernels_impl.inc instantiated with this ISA's vector type and block sizes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ringtrain/core/error.h"
#include "ringtrain/ops/cpu/blocks_avx2.h"
#include "ringtrain/ops/cpu/simd_avx2.h"
#include "ringtrain/ops/cpu/scratch.h"
#include "ringtrain/ops/cpu/tables.h"

namespace ringtrain::ops::cpu {
namespace {

using V = VecAvx2;
struct Cfg : Avx2Blocks {};  // the register-block sizes (blocks_avx2.h)

#include "ringtrain/ops/cpu/kernels_impl.inc"

}  // namespace

void fill_avx2(KernelTable& table) { fill(table); }

}  // namespace ringtrain::ops::cpu
