// oneDNN's convolution as a measured rival (benchmarks only; built when libdnnl-dev is found, then
// RINGTRAIN_HAVE_DNNL=1). Each pass's primitive is created once for a shape, with every tensor in the
// memory layout oneDNN prefers (format_tag::any), and its data lives in those layouts, so a timed
// forward()/backward_data()/backward_weight() is oneDNN at its best: no reorders inside the timing.
// set_* and get_* convert from and to the plain PyTorch layouts (for validation against ringtrain).
// Grouped and depthwise convolutions (groups > 1) run oneDNN's grouped primitives (weights [g][K/g][C/g][R][S],
// the same memory as PyTorch's [K][C/g][R][S]). with_bias = false: no bias in forward, no dbias in
// backward-weight (the zoo's convs, which precede batch norm); set_weight's and get_dweight's bias is then unused.
#pragma once
#include <memory>
#include <string>

#include "ringtrain/ops/conv2d.h"

namespace ringtrain::ops::dnnl_rival {

class Conv2d {
 public:
  explicit Conv2d(const Conv2dShape& s, bool with_bias = true);
  ~Conv2d();
  Conv2d(const Conv2d&) = delete;
  Conv2d& operator=(const Conv2d&) = delete;

  void set_input(const float* inp);                      // [N,C,H,W]
  void set_weight(const float* weight, const float* bias);  // [K,C/groups,R,S], [K]
  void set_dout(const float* dout);                      // [N,K,P,Q]
  void forward();                                        // out = conv(inp) + bias
  void backward_data();                                  // dinp = conv_transpose(dout)
  void backward_weight();                                // dweight, dbias
  void get_output(float* out);
  void get_dinp(float* dinp);
  void get_dweight(float* dweight, float* dbias);
  // oneDNN's implementation names of the three passes, e.g. "brg:avx512_core / jit:avx512_core / ...".
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The instruction set oneDNN's JIT runs at (ONEDNN_MAX_CPU_ISA or the CPU), e.g. "avx512_core_bf16".
std::string effective_isa();

}  // namespace ringtrain::ops::dnnl_rival
