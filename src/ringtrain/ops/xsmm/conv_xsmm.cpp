#include "ringtrain/ops/xsmm/conv_xsmm.h"

#include <libxsmm.h>
// LIBXSMM's internal layer struct (Debian's libxsmm-dev installs it beside its sources): read only by
// implementation(), to say which loops LIBXSMM chose for this shape (same package, same 1.17 build).
#if __has_include(<libxsmm/libxsmm_main.h>)
#include <libxsmm/libxsmm_main.h>
#define RINGTRAIN_XSMM_INTERNALS 1
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "ringtrain/core/error.h"

namespace ringtrain::ops::xsmm_rival {

namespace {

std::string describe(const Conv2dShape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " " + std::to_string(s.H) + "x" +
         std::to_string(s.W) + " -> K=" + std::to_string(s.K) + " " + std::to_string(s.R) + "x" + std::to_string(s.S) +
         " stride " + std::to_string(s.stride) + " pad " + std::to_string(s.pad) +
         " groups " + std::to_string(s.groups);
}

[[noreturn]] void no_kernel(const Conv2dShape& s, const std::string& why) {
  throw Error("LIBXSMM: no kernel for " + describe(s) + ": " + why);
}

void check_ok(libxsmm_dnn_err_t status, const std::string& what) {
  if (status != LIBXSMM_DNN_SUCCESS) throw Error("LIBXSMM: " + what + ": " + libxsmm_dnn_get_error(status));
}

// One tensor of the layer in LIBXSMM's layout for it: the layout the layer asked for, our 64-byte aligned
// copy of the data, and the LIBXSMM tensor linked to that data.
struct Tensor {
  libxsmm_dnn_tensor_datalayout* layout = nullptr;
  float* data = nullptr;
  libxsmm_dnn_tensor* tensor = nullptr;
  std::size_t elements = 0;

  Tensor() = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() {
    if (tensor) libxsmm_dnn_destroy_tensor(tensor);
    std::free(data);
    if (layout) libxsmm_dnn_destroy_tensor_datalayout(layout);
  }

  // Allocates (zeroed) and links the tensor of `type` in the layout `layer` prefers, then binds it to the layer.
  void create(libxsmm_dnn_layer* layer, libxsmm_dnn_tensor_type type, const char* name) {
    libxsmm_dnn_err_t st = LIBXSMM_DNN_SUCCESS;
    layout = libxsmm_dnn_create_tensor_datalayout(layer, type, &st);
    check_ok(st, std::string("layout of ") + name);
    elements = libxsmm_dnn_get_tensor_elements(layout, &st);
    check_ok(st, std::string("size of ") + name);
    const std::size_t bytes = (elements * sizeof(float) + 63) / 64 * 64;
    data = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!data) throw Error(std::string("LIBXSMM: out of memory for ") + name);
    std::memset(data, 0, bytes);
    tensor = libxsmm_dnn_link_tensor(layout, data, &st);
    check_ok(st, std::string("link ") + name);
    check_ok(libxsmm_dnn_bind_tensor(layer, tensor, type), std::string("bind ") + name);
  }

  // Activations are [N][C/cb][H+2p][W+2p][cb] (the layout lists its dims innermost first: cb, W+2p, H+2p, C/cb,
  // N), p the physical padding; the element (n, c, h, w) of the plain [N][C][H][W] with H x W inside the rim.
  std::size_t at(int n, int c, int h, int w, int H, int W) const {
    const int cb = int(layout->dim_size[0]), wp = int(layout->dim_size[1]), hp = int(layout->dim_size[2]),
              blocks = int(layout->dim_size[3]);
    const int ph = (hp - H) / 2, pw = (wp - W) / 2;
    return (((std::size_t(n) * blocks + c / cb) * hp + h + ph) * wp + w + pw) * cb + c % cb;
  }

  // Plain [N][C][H][W] into the blocked layout; the rim (physical padding) stays zero.
  void activation_in(const float* plain, int N, int C, int H, int W) {
    std::memset(data, 0, elements * sizeof(float));
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h)
          for (int w = 0; w < W; ++w) data[at(n, c, h, w, H, W)] = *plain++;
  }
  // The blocked layout's interior back to plain [N][C][H][W].
  void activation_out(float* plain, int N, int C, int H, int W) const {
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h)
          for (int w = 0; w < W; ++w) *plain++ = data[at(n, c, h, w, H, W)];
  }
};

}  // namespace

std::string target_arch() {
  return std::string(libxsmm_get_target_arch()) + " (CPUID: " + libxsmm_cpuid_name(libxsmm_cpuid()) + ")";
}

struct Conv2d::Impl {
  Conv2dShape s;
  libxsmm_dnn_layer* layer = nullptr;
  Tensor input, output, filter, filter_tr, dinput, doutput, dfilter;
  void* scratch = nullptr;

  ~Impl() {
    if (layer) {
      if (scratch) libxsmm_dnn_release_scratch(layer, LIBXSMM_DNN_COMPUTE_KIND_ALL);
      libxsmm_dnn_destroy_conv_layer(layer);
    }
    std::free(scratch);
  }

  void run(libxsmm_dnn_compute_kind kind, const char* pass) {
    check_ok(libxsmm_dnn_execute_st(layer, kind, 0, 0), pass);
  }
};

Conv2d::Conv2d(const Conv2dShape& s) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.s = s;
  if (s.groups != 1)
    no_kernel(s, "LIBXSMM 1.17's conv descriptor has no groups (grouped and depthwise convolutions)");
  libxsmm_dnn_conv_desc d;
  std::memset(&d, 0, sizeof(d));
  d.N = s.N, d.C = s.C, d.H = s.H, d.W = s.W, d.K = s.K, d.R = s.R, d.S = s.S;
  d.u = d.v = s.stride;
  // Physical padding: the input and the output (and their gradients) carry a zero rim of `pad`, the layout
  // LIBXSMM's tuned backward-data loops require (without it they drop to their fallback loops).
  d.pad_h = d.pad_w = s.pad;
  d.pad_h_in = d.pad_w_in = s.pad;
  d.pad_h_out = d.pad_w_out = s.pad;
  d.threads = 1;
  d.datatype_in = d.datatype_out = LIBXSMM_DNN_DATATYPE_F32;
  d.buffer_format = d.filter_format = LIBXSMM_DNN_TENSOR_FORMAT_LIBXSMM;
  d.algo = LIBXSMM_DNN_CONV_ALGO_DIRECT;
  // Overwrite: forward and backward-data write their result rather than add to it (no zeroing in the timing).
  // No filter transpose: backward-data reads a transposed copy of the filter that set_weight makes (as oneDNN's
  // backward-data gets its own copy of the weights in its preferred layout), not one it transposes each call.
  d.options = LIBXSMM_DNN_CONV_OPTION_BWD_NO_FILTER_TRANSPOSE_OVERWRITE;
  d.fuse_ops = LIBXSMM_DNN_CONV_FUSE_NONE;
  libxsmm_dnn_err_t st = LIBXSMM_DNN_SUCCESS;
  m.layer = libxsmm_dnn_create_conv_layer(d, &st);
  if (!m.layer || st != LIBXSMM_DNN_SUCCESS) no_kernel(s, std::string("create layer: ") + libxsmm_dnn_get_error(st));

  m.input.create(m.layer, LIBXSMM_DNN_REGULAR_INPUT, "input");
  m.output.create(m.layer, LIBXSMM_DNN_REGULAR_OUTPUT, "output");
  m.filter.create(m.layer, LIBXSMM_DNN_REGULAR_FILTER, "filter");
  m.filter_tr.create(m.layer, LIBXSMM_DNN_REGULAR_FILTER_TRANS, "transposed filter");
  m.dinput.create(m.layer, LIBXSMM_DNN_GRADIENT_INPUT, "input gradient");
  m.doutput.create(m.layer, LIBXSMM_DNN_GRADIENT_OUTPUT, "output gradient");
  m.dfilter.create(m.layer, LIBXSMM_DNN_GRADIENT_FILTER, "filter gradient");
  const std::size_t scratch_bytes = libxsmm_dnn_get_scratch_size(m.layer, LIBXSMM_DNN_COMPUTE_KIND_ALL, &st);
  check_ok(st, "scratch size");
  m.scratch = std::aligned_alloc(64, (scratch_bytes + 64) / 64 * 64);
  if (!m.scratch) throw Error("LIBXSMM: out of memory for the scratch");
  check_ok(libxsmm_dnn_bind_scratch(m.layer, LIBXSMM_DNN_COMPUTE_KIND_ALL, m.scratch), "bind scratch");

  // A trial run of each pass (on zeros): LIBXSMM reports a missing kernel (an architecture or a data type
  // it has none for) only when a pass runs, and this is where a rival without a kernel should say so.
  const std::pair<libxsmm_dnn_compute_kind, const char*> passes[] = {
      {LIBXSMM_DNN_COMPUTE_KIND_FWD, "forward"},
      {LIBXSMM_DNN_COMPUTE_KIND_BWD, "backward-data"},
      {LIBXSMM_DNN_COMPUTE_KIND_UPD, "backward-weight"}};
  for (auto [kind, name] : passes) {
    const libxsmm_dnn_err_t rs = libxsmm_dnn_execute_st(m.layer, kind, 0, 0);
    if (rs != LIBXSMM_DNN_SUCCESS) no_kernel(s, std::string(name) + ": " + libxsmm_dnn_get_error(rs));
  }
}

Conv2d::~Conv2d() = default;

void Conv2d::set_input(const float* inp) {
  const Conv2dShape& s = impl_->s;
  impl_->input.activation_in(inp, s.N, s.C, s.H, s.W);
}
void Conv2d::set_weight(const float* weight, const float* /*bias: not fused*/) {
  check_ok(libxsmm_dnn_copyin_tensor(impl_->filter.tensor, weight, LIBXSMM_DNN_TENSOR_FORMAT_KCRS),
           "copy in the filter");
  check_ok(libxsmm_dnn_trans_reg_filter(impl_->layer), "transpose the filter");
}
void Conv2d::set_dout(const float* dout) {
  const Conv2dShape& s = impl_->s;
  impl_->doutput.activation_in(dout, s.N, s.K, s.P(), s.Q());
}

void Conv2d::forward() { impl_->run(LIBXSMM_DNN_COMPUTE_KIND_FWD, "forward"); }
void Conv2d::backward_data() { impl_->run(LIBXSMM_DNN_COMPUTE_KIND_BWD, "backward-data"); }
void Conv2d::backward_weight() { impl_->run(LIBXSMM_DNN_COMPUTE_KIND_UPD, "backward-weight"); }

void Conv2d::get_output(float* out) {
  const Conv2dShape& s = impl_->s;
  impl_->output.activation_out(out, s.N, s.K, s.P(), s.Q());
}
void Conv2d::get_dinp(float* dinp) {
  const Conv2dShape& s = impl_->s;
  impl_->dinput.activation_out(dinp, s.N, s.C, s.H, s.W);
}
void Conv2d::get_dweight(float* dweight, float* /*dbias: not computed*/) {
  check_ok(libxsmm_dnn_copyout_tensor(impl_->dfilter.tensor, dweight, LIBXSMM_DNN_TENSOR_FORMAT_KCRS),
           "copy out the filter gradient");
}

std::string Conv2d::implementation() const {
  std::string name = std::string("v") + LIBXSMM_VERSION + " dnn direct conv (JIT batch-reduce GEMMs), target " +
                     target_arch();
#ifdef RINGTRAIN_XSMM_INTERNALS
  const libxsmm_dnn_layer& l = *impl_->layer;
  auto loops = [](int fallback) { return fallback ? "fallback loops" : "tuned loops"; };
  name += ", blocks C" + std::to_string(l.ifmblock) + "/K" + std::to_string(l.ofmblock) + "; fwd " +
          loops(l.use_fallback_fwd_loops) + ", bwd " + loops(l.use_fallback_bwd_loops) + ", upd " +
          (l.upd_use_batchreduce ? "batch-reduce GEMMs" : "per-row GEMMs");
#endif
  return name;
}

}  // namespace ringtrain::ops::xsmm_rival
