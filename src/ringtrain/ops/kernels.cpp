// Kernel table selection: cpuid decides once; RINGTRAIN_ISA forces a level.
#include "ringtrain/ops/kernels.h"

#include <cstdlib>

#include "ringtrain/core/error.h"
#include "ringtrain/ops/cpu/tables.h"

namespace ringtrain::ops {

const char* isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::Ref: return "ref";
    case IsaLevel::Scalar: return "scalar";
    case IsaLevel::Avx2: return "avx2";
    case IsaLevel::Avx512: return "avx512";
  }
  return "?";
}

IsaLevel parse_isa(const std::string& name) {
  for (IsaLevel l : {IsaLevel::Ref, IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::Avx512})
    if (name == isa_name(l)) return l;
  throw Error("ISA level (--isa / RINGTRAIN_ISA) '" + name + "' is not one of ref, scalar, avx2, avx512");
}

const KernelTable& reference_kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.level = IsaLevel::Ref;
    t.conv2d_forward = ref::conv2d_forward<float>;
    t.conv2d_backward_data = ref::conv2d_backward_data<float>;
    t.conv2d_backward_weight = ref::conv2d_backward_weight<float>;
    t.maxpool2d_forward = ref::maxpool2d_forward<float>;
    t.maxpool2d_backward = ref::maxpool2d_backward<float>;
    t.relu_forward = ref::relu_forward<float>;
    t.relu_backward = ref::relu_backward<float>;
    t.linear_forward = ref::linear_forward<float>;
    t.linear_backward = ref::linear_backward<float>;
    t.softmax_xent_forward = ref::softmax_xent_forward<float>;
    t.softmax_xent_backward = ref::softmax_xent_backward<float>;
    t.adam_step = ref::adam_step;
    // ---- the zoo's convolution and pooling ops ----
    t.avgpool_global_forward = ref::avgpool_global_forward<float>;
    t.avgpool_global_backward = ref::avgpool_global_backward<float>;

    // ---- end of the zoo's convolution and pooling ops ----



    // ---- the zoo's normalisation, activation and Transformer ops ----
    t.batch_norm_forward_train = ref::batch_norm_forward_train<float>;
    t.batch_norm_forward_eval = ref::batch_norm_forward_eval<float>;
    t.batch_norm_backward_train = ref::batch_norm_backward_train<float>;
    t.batch_norm_backward_eval = ref::batch_norm_backward_eval<float>;
    t.relu6_forward = ref::relu6_forward<float>;
    t.relu6_backward = ref::relu6_backward<float>;
    t.gelu_forward = ref::gelu_forward<float>;
    t.gelu_backward = ref::gelu_backward<float>;
    t.add_forward = ref::add_forward<float>;
    t.dropout_forward = ref::dropout_forward<float>;
    t.transpose_samples = ref::transpose_samples<float>;
    t.layer_norm_forward = ref::layer_norm_forward<float>;
    t.layer_norm_backward = ref::layer_norm_backward<float>;
    t.attention_forward = ref::attention_forward<float>;
    t.attention_backward = ref::attention_backward<float>;

    // ---- end of the zoo's normalisation, activation and Transformer ops ----
    return t;
  }();
  return table;
}

IsaLevel detect_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return IsaLevel::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaLevel::Avx2;
  return IsaLevel::Scalar;
}

std::vector<IsaLevel> supported_isas() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : {IsaLevel::Ref, IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::Avx512})
    if (int(l) <= int(detect_isa())) out.push_back(l);
  return out;
}

const KernelTable& kernels_for(IsaLevel level) {
  // (not check(): the message would be built - allocated - on every call, and the 16-bit tables' kernels
  // call this on every pass)
  if (int(level) > int(detect_isa()))
    throw Error(std::string("ISA level '") + isa_name(level) + "' is not supported by this CPU (best: " +
                isa_name(detect_isa()) + ")");
  // Each fast table is filled on first use, by its own ISA's translation unit (ops/cpu/kernels_*.cpp).
  static const KernelTable scalar = [] {
    KernelTable t;
    t.level = IsaLevel::Scalar;
    cpu::fill_scalar(t);
    return t;
  }();
  switch (level) {
    case IsaLevel::Ref: return reference_kernels();
    case IsaLevel::Scalar: return scalar;
    case IsaLevel::Avx2: {
      static const KernelTable avx2 = [] {
        KernelTable t;
        t.level = IsaLevel::Avx2;
        cpu::fill_avx2(t);
        return t;
      }();
      return avx2;
    }
    case IsaLevel::Avx512: {
      static const KernelTable avx512 = [] {
        KernelTable t;
        t.level = IsaLevel::Avx512;
        cpu::fill_avx512(t);
        return t;
      }();
      return avx512;
    }
  }
  return reference_kernels();
}

IsaLevel default_isa() {
  const char* env = std::getenv("RINGTRAIN_ISA");
  if (env && *env) return parse_isa(env);
  return detect_isa();
}

}  // namespace ringtrain::ops
