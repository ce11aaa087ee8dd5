// LIBXSMM's convolution as a measured rival (benchmarks only; built when libxsmm-dev is found, then
// RINGTRAIN_HAVE_XSMM=1). One LIBXSMM 1.17 DNN conv layer per shape (libxsmm_dnn_create_conv_layer: direct
// convolution from JIT-ed batch-reduce GEMMs), run on one thread (libxsmm_dnn_execute_st, thread 0). Every
// tensor lives in LIBXSMM's own blocked layout (activations [N][C/c][H+2p][W+2p][c] with a zero rim of the
// padding - physical padding, which LIBXSMM's tuned backward-data loops need - and weights [K/k][C/c][R][S][c][k],
// c and k LIBXSMM's channel blocks), linked and bound to the layer once; backward-data reads a transposed copy
// of the weights made by set_weight (LIBXSMM_DNN_CONV_OPTION_BWD_NO_FILTER_TRANSPOSE, as oneDNN's backward-data
// has its own copy of the weights). So a timed forward() / backward_data() / backward_weight() is LIBXSMM at
// its best: no layout change inside the timing. set_* and get_* convert from and to the plain PyTorch layouts
// (for validation against ringtrain). LIBXSMM_TARGET (e.g. hsw, skx, clx, cpx) sets the ISA its JIT emits.
//
// No bias: LIBXSMM 1.17's conv descriptor fuses nothing (libxsmm_dnn_conv_fuse_op has only _NONE), so
// forward() leaves the bias out and backward_weight() computes no bias gradient.
// A shape LIBXSMM has no kernel for (groups != 1: the descriptor has no groups) makes the constructor throw
// ringtrain::Error ("LIBXSMM: no kernel for <shape>: <why>"); so does a pass that fails its trial run there.
#pragma once
#include <memory>
#include <string>

#include "ringtrain/ops/conv2d.h"

namespace ringtrain::ops::xsmm_rival {

class Conv2d {
 public:
  explicit Conv2d(const Conv2dShape& s);
  ~Conv2d();
  Conv2d(const Conv2d&) = delete;
  Conv2d& operator=(const Conv2d&) = delete;

  void set_input(const float* inp);                         // [N,C,H,W]
  void set_weight(const float* weight, const float* bias);  // [K,C,R,S]; bias ignored (not fused, see above)
  void set_dout(const float* dout);                         // [N,K,P,Q]
  void forward();                                           // out = conv(inp), no bias
  void backward_data();                                     // dinp = conv_transpose(dout)
  void backward_weight();                                   // dweight (no dbias)
  void get_output(float* out);
  void get_dinp(float* dinp);
  void get_dweight(float* dweight, float* dbias);  // dbias (may be null) is left untouched
  // What runs: LIBXSMM's version, target architecture (LIBXSMM_TARGET or CPUID), channel blocking and,
  // per pass, whether its tuned loops or its generic fallback loops run.
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The instruction set LIBXSMM's JIT emits code for, e.g. "cpx (CPUID: cpx)".
std::string target_arch();

}  // namespace ringtrain::ops::xsmm_rival
