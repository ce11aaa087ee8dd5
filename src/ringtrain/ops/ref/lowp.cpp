// 16-bit tables made of rounding plus the fp32 kernels of a level (lowp.h): the fallback where the CPU
// has no BF16 dot product, the fp16 path everywhere, and at level ref the reference twin of the fast
// bf16 kernels. Rounded copies live in per-thread buffers that grow only on the first step.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/half.h"
#include "ringtrain/ops/cpu/amx.h"
#include "ringtrain/ops/cpu/bf16_tables.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::ops {
namespace {

// The composition's rounded operands (rounded_copy's slots): 0 activations / dout, 1 weights, 2 a second activation.
template <int P>
const float* rounded(int slot, const float* x, std::size_t n) {
  return rounded_copy(Precision(P), slot, x, n);
}

template <int LV>
const KernelTable& base() {
  return kernels_for(IsaLevel(LV));
}

inline std::size_t in_size(const Conv2dShape& s) { return std::size_t(s.N) * s.C * s.H * s.W; }
inline std::size_t out_size(const Conv2dShape& s) { return std::size_t(s.N) * s.K * s.P() * s.Q(); }
inline std::size_t w_size(const Conv2dShape& s) { return std::size_t(s.K) * s.Cg() * s.R * s.S; }

template <int LV, int P>
struct Wrap {
  static void conv_fwd(float* out, const float* inp, const float* weight, const float* bias, const Conv2dShape& s) {
    base<LV>().conv2d_forward(out, rounded<P>(0, inp, in_size(s)), rounded<P>(1, weight, w_size(s)), bias, s);
  }
  static void conv_bwd_data(float* dinp, const float* dout, const float* weight, const Conv2dShape& s) {
    base<LV>().conv2d_backward_data(dinp, rounded<P>(0, dout, out_size(s)), rounded<P>(1, weight, w_size(s)), s);
  }
  static void conv_bwd_weight(float* dweight, float* dbias, const float* dout, const float* inp, const Conv2dShape& s) {
    base<LV>().conv2d_backward_weight(dweight, dbias, rounded<P>(0, dout, out_size(s)), rounded<P>(2, inp, in_size(s)), s);
  }
  static std::size_t crp_saved(const Conv2dShape& s) { return base<LV>().conv2d_relu_pool_saved(s); }
  static void crp_fwd(float* out, float* saved, const float* inp, const float* weight, const float* bias,
                      const Conv2dShape& s) {
    base<LV>().conv2d_relu_pool_forward(out, saved, rounded<P>(0, inp, in_size(s)), rounded<P>(1, weight, w_size(s)),
                                        bias, s);
  }
  // inp is left as it is: these tables hand activations over plain (below), so the base kernel keeps its own
  // rounded copy of the input in saved and never reads it.
  static void crp_bwd(float* dinp, float* dweight, float* dbias, const float* dout, const float* saved,
                      const float* inp, const float* weight, const Conv2dShape& s) {
    base<LV>().conv2d_relu_pool_backward(dinp, dweight, dbias, rounded<P>(0, dout, out_size(s) / 4), saved, inp,
                                         rounded<P>(1, weight, w_size(s)), s);
  }
  static void lin_fwd(float* out, const float* inp, const float* weight, const float* bias, const LinearShape& s) {
    base<LV>().linear_forward(out, rounded<P>(0, inp, std::size_t(s.N) * s.I),
                              rounded<P>(1, weight, std::size_t(s.O) * s.I), bias, s);
  }
  // The weight only takes part in dinp's products: without dinp (vit's split backward-data passes compute it
  // apart, nn/tp_reduction.cpp; a first layer) it is not rounded.
  static void lin_bwd(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                      const float* weight, const LinearShape& s) {
    base<LV>().linear_backward(dinp, dweight, dbias, rounded<P>(0, dout, std::size_t(s.N) * s.O),
                               rounded<P>(2, inp, std::size_t(s.N) * s.I),
                               dinp ? rounded<P>(1, weight, std::size_t(s.O) * s.I) : weight, s);
  }
  static KernelTable make() {
    KernelTable t = base<LV>();  // the exact / fp32 ops as they are
    t.conv2d_forward = conv_fwd;
    t.conv2d_backward_data = conv_bwd_data;
    t.conv2d_backward_weight = conv_bwd_weight;
    if (t.conv2d_relu_pool_forward) {
      t.conv2d_relu_pool_saved = crp_saved;
      t.conv2d_relu_pool_forward = crp_fwd;
      t.conv2d_relu_pool_backward = crp_bwd;
    }
    // Activations cross between layers in the plain layout (a 16-bit blocked hand-over is a table's own kernel).
    t.conv2d_relu_pool_blocked = nullptr;
    t.conv2d_relu_pool_block = 0;
    t.conv2d_relu_pool_block_bf16 = false;
    t.linear_forward = lin_fwd;
    t.linear_backward = lin_bwd;
    // The split sums compose lin_fwd (nn/tp_reduction.cpp), so their operands are rounded too.
    t.linear_forward_chunked = nullptr;
    t.linear_backward_data_chunked = nullptr;
    // ---- the zoo's convolution and pooling ops ----

    // ---- end of the zoo's convolution and pooling ops ----



    // ---- the zoo's normalisation, activation and Transformer ops ----
    // The attention core multiplies its operands (q k^T, probs v and their gradients): qkv and dout are rounded
    // like a linear op's; the probabilities are the kernel's own fp32 state (as conv+pool's `saved`). The other
    // ops of this region are fp32 (the copied base entries).
    t.attention_forward = [](float* out, float* probs, const float* qkv, const AttentionShape& s) {
      base<LV>().attention_forward(out, probs, rounded<P>(0, qkv, std::size_t(s.N) * s.T * 3 * s.D), s);
    };
    t.attention_backward = [](float* dqkv, const float* dout, const float* qkv, const float* probs,
                              const AttentionShape& s) {
      base<LV>().attention_backward(dqkv, rounded<P>(0, dout, std::size_t(s.N) * s.T * s.D),
                                    rounded<P>(2, qkv, std::size_t(s.N) * s.T * 3 * s.D), probs, s);
    };

    // ---- end of the zoo's normalisation, activation and Transformer ops ----
    return t;
  }
};

template <int P>
const KernelTable& rounding_table(IsaLevel level) {
  switch (level) {
    case IsaLevel::Ref: { static const KernelTable t = Wrap<0, P>::make(); return t; }
    case IsaLevel::Scalar: { static const KernelTable t = Wrap<1, P>::make(); return t; }
    case IsaLevel::Avx2: { static const KernelTable t = Wrap<2, P>::make(); return t; }
    case IsaLevel::Avx512: { static const KernelTable t = Wrap<3, P>::make(); return t; }
  }
  throw Error("unknown ISA level");
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    if (name == precision_name(p)) return p;
  throw Error("precision (--precision) '" + name + "' is not one of fp32, bf16, fp16");
}

bool cpu_has_avx512_bf16() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  }();
  return ok;
}

bool cpu_has_amx_bf16() { return cpu_has_avx512_bf16() && cpu::amx_bf16_usable(); }

bool amx_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("RINGTRAIN_AMX");
    return cpu_has_amx_bf16() && !(env && std::string(env) == "0");
  }();
  return on;
}

const KernelTable& dot_product_bf16_kernels() {
  kernels_for(IsaLevel::Avx512);  // throws if the CPU cannot run AVX-512
  if (!cpu_has_avx512_bf16()) throw Error("the vdpbf16ps kernels need AVX512_BF16, which this CPU does not have");
  static const KernelTable t = [] {
    KernelTable k;
    cpu::fill_bf16_avx512(k);
    return k;
  }();
  return t;
}

const KernelTable& amx_bf16_kernels() {
  if (!cpu_has_amx_bf16())
    throw Error("the AMX kernels need AMX-BF16 tiles (and the OS's permission to use them): not on this CPU");
  static const KernelTable t = [] {
    KernelTable k;
    cpu::fill_bf16_amx(k);
    return k;
  }();
  return t;
}

const float* rounded_copy(Precision p, int slot, const float* x, std::size_t n) {
  if (!x) return nullptr;
  thread_local AlignedBuffer<float> buf[3];
  AlignedBuffer<float>& b = buf[slot];
  if (b.size() < n) b.resize(n + n / 4);
  if (p == Precision::Bf16)
    round_bf16(b.data(), x, n);
  else
    round_fp16(b.data(), x, n);
  return b.data();
}

const KernelTable& rounding_kernels_for(IsaLevel level, Precision p) {
  kernels_for(level);  // throws if the CPU cannot run the level
  if (p == Precision::Fp32) return kernels_for(level);
  return p == Precision::Bf16 ? rounding_table<int(Precision::Bf16)>(level) : rounding_table<int(Precision::Fp16)>(level);
}

const char* precision_path(IsaLevel level, Precision p) {
  if (p == Precision::Fp32) return "fp32 arithmetic";
  if (p == Precision::Fp16) return "operands rounded to fp16, fp32 arithmetic (the fp32 kernels)";
  if (level == IsaLevel::Avx512 && amx_enabled())
    return "AMX tiles (tdpbf16ps): linears, convs but the depthwise ones; the rest (LeNet's fused convs included): "
           "rounded operands, fp32 kernels";
  if (level == IsaLevel::Avx512 && cpu_has_avx512_bf16())
    return "vdpbf16ps: convs but the depthwise ones, linears; the rest: rounded operands, fp32 kernels";
  const char* how = level == IsaLevel::Avx2 ? "operands rounded to bf16 as the fp32 kernels copy them, fp32 arithmetic"
                                            : "operands rounded to bf16, fp32 arithmetic (the fp32 kernels of this level)";
  if (cpu_has_avx512_bf16()) return how;
  return level == IsaLevel::Avx2
             ? "operands rounded to bf16 as the fp32 kernels copy them, fp32 arithmetic (no AVX512_BF16 on this CPU)"
             : "operands rounded to bf16, fp32 arithmetic (the fp32 kernels: no AVX512_BF16 on this CPU)";
}

const KernelTable& kernels_for(IsaLevel level, Precision p) {
  if (p == Precision::Bf16 && level == IsaLevel::Avx512 && cpu_has_avx512_bf16())
    return amx_enabled() ? amx_bf16_kernels() : dot_product_bf16_kernels();
  if (p == Precision::Bf16 && level == IsaLevel::Avx2) {
    kernels_for(level);  // throws if the CPU cannot run AVX2
    static const KernelTable t = [] {
      KernelTable k;
      cpu::fill_bf16_avx2(k);
      return k;
    }();
    return t;
  }
  return rounding_kernels_for(level, p);
}

}  // namespace ringtrain::ops
