#include "ringtrain/ops/dnnl/conv_dnnl.h"

#include <dnnl.hpp>
#include <unordered_map>

namespace ringtrain::ops::dnnl_rival {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Conv2d::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  bool with_bias = true;
  tag wei_tag = tag::oihw;  // goihw when grouped
  memory::dims src_dims, wei_dims, bias_dims, dst_dims;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd;
  dnnl::primitive fwd, bwd_data, bwd_w;
  // Data in oneDNN's preferred layouts (each pass may prefer its own).
  memory src, wei, bias, dst;              // forward
  memory bd_diff_dst, bd_wei, bd_diff_src;  // backward-data
  memory bw_src, bw_diff_dst, bw_diff_wei, bw_diff_bias;  // backward-weights
  std::unordered_map<int, memory> fwd_args, bwd_data_args, bwd_w_args;  // built once, outside the timing

  void copy_in(const float* plain, const memory::dims& dims, tag t, const memory& dst_mem) {
    memory user({dims, dt::f32, t}, eng, const_cast<float*>(plain));
    dnnl::reorder(user, dst_mem).execute(strm, user, const_cast<memory&>(dst_mem));
    strm.wait();
  }
  void copy_out(float* plain, const memory::dims& dims, tag t, const memory& src_mem) {
    memory user({dims, dt::f32, t}, eng, plain);
    dnnl::reorder(src_mem, user).execute(strm, const_cast<memory&>(src_mem), user);
    strm.wait();
  }
};

Conv2d::Conv2d(const Conv2dShape& s, bool with_bias) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.with_bias = with_bias;
  m.src_dims = {s.N, s.C, s.H, s.W};
  if (s.groups == 1) {
    m.wei_dims = {s.K, s.C, s.R, s.S};
  } else {
    m.wei_dims = {s.groups, s.Kg(), s.Cg(), s.R, s.S};
    m.wei_tag = tag::goihw;
  }
  m.bias_dims = {s.K};
  m.dst_dims = {s.N, s.K, s.P(), s.Q()};
  const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
  const memory::desc src_md(m.src_dims, dt::f32, tag::any), wei_md(m.wei_dims, dt::f32, tag::any),
      bias_md(m.bias_dims, dt::f32, tag::any), dst_md(m.dst_dims, dt::f32, tag::any);
  const auto fwd_desc =
      with_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                  src_md, wei_md, bias_md, dst_md, strides, pad, pad)
                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                  src_md, wei_md, dst_md, strides, pad, pad);
  m.fwd_pd = dnnl::convolution_forward::primitive_desc(fwd_desc, m.eng);
  m.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_md, wei_md, dst_md, strides, pad,
                                            pad),
      m.eng, m.fwd_pd);
  const auto bwd_w_desc =
      with_bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                                           dst_md, strides, pad, pad)
                : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_md, wei_md, dst_md,
                                                           strides, pad, pad);
  m.bwd_w_pd = dnnl::convolution_backward_weights::primitive_desc(bwd_w_desc, m.eng, m.fwd_pd);
  m.fwd = dnnl::convolution_forward(m.fwd_pd);
  m.bwd_data = dnnl::convolution_backward_data(m.bwd_data_pd);
  m.bwd_w = dnnl::convolution_backward_weights(m.bwd_w_pd);
  m.src = memory(m.fwd_pd.src_desc(), m.eng);
  m.wei = memory(m.fwd_pd.weights_desc(), m.eng);
  if (with_bias) m.bias = memory(m.fwd_pd.bias_desc(), m.eng);
  m.dst = memory(m.fwd_pd.dst_desc(), m.eng);
  m.bd_diff_dst = memory(m.bwd_data_pd.diff_dst_desc(), m.eng);
  m.bd_wei = memory(m.bwd_data_pd.weights_desc(), m.eng);
  m.bd_diff_src = memory(m.bwd_data_pd.diff_src_desc(), m.eng);
  m.bw_src = memory(m.bwd_w_pd.src_desc(), m.eng);
  m.bw_diff_dst = memory(m.bwd_w_pd.diff_dst_desc(), m.eng);
  m.bw_diff_wei = memory(m.bwd_w_pd.diff_weights_desc(), m.eng);
  if (with_bias) m.bw_diff_bias = memory(m.bwd_w_pd.diff_bias_desc(), m.eng);
  m.fwd_args = {{DNNL_ARG_SRC, m.src}, {DNNL_ARG_WEIGHTS, m.wei}, {DNNL_ARG_DST, m.dst}};
  m.bwd_data_args = {
      {DNNL_ARG_DIFF_DST, m.bd_diff_dst}, {DNNL_ARG_WEIGHTS, m.bd_wei}, {DNNL_ARG_DIFF_SRC, m.bd_diff_src}};
  m.bwd_w_args = {{DNNL_ARG_SRC, m.bw_src}, {DNNL_ARG_DIFF_DST, m.bw_diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, m.bw_diff_wei}};
  if (with_bias) {
    m.fwd_args[DNNL_ARG_BIAS] = m.bias;
    m.bwd_w_args[DNNL_ARG_DIFF_BIAS] = m.bw_diff_bias;
  }
}

Conv2d::~Conv2d() = default;

void Conv2d::set_input(const float* inp) {
  impl_->copy_in(inp, impl_->src_dims, tag::nchw, impl_->src);
  impl_->copy_in(inp, impl_->src_dims, tag::nchw, impl_->bw_src);
}
void Conv2d::set_weight(const float* weight, const float* bias) {
  impl_->copy_in(weight, impl_->wei_dims, impl_->wei_tag, impl_->wei);
  impl_->copy_in(weight, impl_->wei_dims, impl_->wei_tag, impl_->bd_wei);
  if (impl_->with_bias) impl_->copy_in(bias, impl_->bias_dims, tag::x, impl_->bias);
}
void Conv2d::set_dout(const float* dout) {
  impl_->copy_in(dout, impl_->dst_dims, tag::nchw, impl_->bd_diff_dst);
  impl_->copy_in(dout, impl_->dst_dims, tag::nchw, impl_->bw_diff_dst);
}

void Conv2d::forward() {
  impl_->fwd.execute(impl_->strm, impl_->fwd_args);
  impl_->strm.wait();
}
void Conv2d::backward_data() {
  impl_->bwd_data.execute(impl_->strm, impl_->bwd_data_args);
  impl_->strm.wait();
}
void Conv2d::backward_weight() {
  impl_->bwd_w.execute(impl_->strm, impl_->bwd_w_args);
  impl_->strm.wait();
}

void Conv2d::get_output(float* out) { impl_->copy_out(out, impl_->dst_dims, tag::nchw, impl_->dst); }
void Conv2d::get_dinp(float* dinp) { impl_->copy_out(dinp, impl_->src_dims, tag::nchw, impl_->bd_diff_src); }
void Conv2d::get_dweight(float* dweight, float* dbias) {
  impl_->copy_out(dweight, impl_->wei_dims, impl_->wei_tag, impl_->bw_diff_wei);
  if (impl_->with_bias) impl_->copy_out(dbias, impl_->bias_dims, tag::x, impl_->bw_diff_bias);
}

std::string Conv2d::implementation() const {
  return std::string(impl_->fwd_pd.impl_info_str()) + " / " + impl_->bwd_data_pd.impl_info_str() + " / " +
         impl_->bwd_w_pd.impl_info_str();
}

std::string effective_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "all";
  }
}

}  // namespace ringtrain::ops::dnnl_rival
