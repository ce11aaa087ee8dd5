// Compute precision of the kernels (--precision fp32|bf16|fp16): one KernelTable per (ISA level, precision)
// with the fp32 table's signatures, so layers and the model run any precision unchanged.
//
// What a 16-bit table means, for every conv and linear pass (the ops that multiply):
//   every tensor operand - activations, incoming gradients (dout) and weights - is rounded to the 16-bit
//   type (round to nearest even) on its way into the kernel; biases stay fp32; products and sums are
//   fp32 (bf16 x bf16 products are exact in fp32); results are fp32, and the next op rounds them again
//   when it reads them. The other ops (ReLU, max-pool, softmax cross-entropy, Adam) are exact or fp32 by
//   design and are the fp32 table's. The fp32 master weights are never modified: each pass makes its
//   16-bit copy of the weights in the packing pass it already does (a fused cast, no extra sweep).
//
// Implementations:
//   bf16 at level avx512 on a CPU with AVX512_BF16: ops/cpu/kernels_bf16_avx512.cpp (vdpbf16ps, 2
//     products a 32-bit lane) for the fused conv+ReLU+pool passes, the linear passes and the zoo's convs;
//     on a CPU with AMX-BF16 too, the linears' and the zoo's convs' GEMMs on AMX tiles (gemm_bf16_amx.h);
//   otherwise, and for fp16 at every level (fp16 is storage and traffic, fp32 math): round the operands
//     (F16C / AVX-512 bulk conversion) and run the fp32 kernels of the same level (ops/ref/lowp.cpp).
//     At level ref this composition is the reference twin the tests hold the fast bf16 kernels to.
#pragma once
#include <cstddef>
#include <string>

#include "ringtrain/ops/kernels.h"

namespace ringtrain::ops {

enum class Precision { Fp32, Bf16, Fp16 };

const char* precision_name(Precision p);
// Parses "fp32|bf16|fp16"; throws Error naming the bad value.
Precision parse_precision(const std::string& name);
// True when this CPU has the BF16 dot-product instructions (AVX512_BF16).
bool cpu_has_avx512_bf16();
// True when this CPU has AMX-BF16 tiles and the OS lets this process use them (ops/cpu/amx.h).
bool cpu_has_amx_bf16();
// Whether the bf16 table at level avx512 runs its GEMMs on AMX tiles: cpu_has_amx_bf16(), unless the
// environment sets RINGTRAIN_AMX=0 (so the vdpbf16ps kernels can be run and tested on such a CPU too).
bool amx_enabled();
// The two bf16 tables of level avx512 by name, for tests and benchmarks that compare them; each throws Error
// where the CPU lacks its instructions (AVX512_BF16; AMX-BF16 with the OS's permission).
const KernelTable& dot_product_bf16_kernels();
const KernelTable& amx_bf16_kernels();
// The table for computing at `level` in precision p (fp32: kernels_for(level)); throws like kernels_for.
const KernelTable& kernels_for(IsaLevel level, Precision p);
// The round-then-fp32 composition at `level` (the fallback; at Ref the reference twin).
const KernelTable& rounding_kernels_for(IsaLevel level, Precision p);
// x [n] rounded to p's 16-bit values (bf16 or fp16, nearest even; NaN stays NaN) in this thread's rounding buffer
// `slot` (0, 1 or 2); null for a null x. Valid until this thread asks for the same slot again: the composition
// (ops/ref/lowp.cpp) and the fast tables that round an operand here (ops/cpu/kernels_bf16_avx2.cpp) share the
// buffers, so a pointer must not outlive the kernel call it was made for. The buffers grow on the first step only.
const float* rounded_copy(Precision p, int slot, const float* x, std::size_t n);
// What kernels_for(level, p) computes with, in a few words for the start-up line (so a CPU without
// AVX512_BF16 says that bf16 runs as rounded operands into the fp32 kernels).
const char* precision_path(IsaLevel level, Precision p);

}  // namespace ringtrain::ops
