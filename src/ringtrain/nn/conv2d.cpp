#include "ringtrain/nn/conv2d.h"

#include <algorithm>

#include "ringtrain/core/error.h"
#include "ringtrain/core/thread_pool.h"

namespace ringtrain::nn {

ops::Conv2dShape conv_shape(int in_channels, int out_channels, int kernel, int stride, int pad, int groups) {
  check(groups >= 1 && in_channels % groups == 0 && out_channels % groups == 0,
        "conv2d: groups " + std::to_string(groups) + " must divide in_channels " + std::to_string(in_channels) +
            " and out_channels " + std::to_string(out_channels));
  ops::Conv2dShape s;
  s.groups = groups;
  s.C = in_channels;
  s.K = out_channels;
  s.R = s.S = kernel;
  s.stride = stride;
  s.pad = pad;
  return s;
}

std::vector<int> declare_conv_params(ParameterSet& params, const std::string& name, const ops::Conv2dShape& s,
                                     bool bias, Init weight_init, Init bias_init) {
  const int fan_in = s.Cg() * s.R * s.S;
  std::vector<int> out{params.declare(name + ".weight", {s.K, s.Cg(), s.R, s.S}, fan_in, weight_init)};
  if (bias) out.push_back(params.declare(name + ".bias", {s.K}, fan_in, bias_init));
  return out;
}

void configure_conv_input(ops::Conv2dShape& s, const Shape& in, const std::string& name) {
  check(in.size() == 3 && in[0] == s.C, name + ": expects input [" + std::to_string(s.C) + ",H,W], got " + shape_str(in));
  s.H = int(in[1]);
  s.W = int(in[2]);
  check(s.P() > 0 && s.Q() > 0, name + ": input " + shape_str(in) + " is smaller than the kernel");
}

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad, int groups,
               bool bias, Init weight_init, Init bias_init)
    : Layer(std::move(name)),
      shape_(conv_shape(in_channels, out_channels, kernel, stride, pad, groups)),
      bias_(bias),
      weight_init_(weight_init),
      bias_init_(bias_init) {}

void Conv2d::declare(ParameterSet& params) {
  param_indices_ = declare_conv_params(params, name_, shape_, bias_, weight_init_, bias_init_);
}

Shape Conv2d::configure(const Shape& in) {
  configure_conv_input(shape_, in, name_);
  return {shape_.K, shape_.P(), shape_.Q()};
}

ops::Conv2dShape Conv2d::shape(int N) const { return with_batch(shape_, N); }

void Conv2d::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) {
  if (s.empty()) return;
  k.conv2d_forward(out, in, p.param(param_indices_[0]), bias_ ? p.param(param_indices_[1]) : nullptr,
                   shape(s.size()));
}

void Conv2d::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                            const float* dout, float* din, const Slice& s) {
  if (s.data_only) {
    if (din && !s.empty()) add_data_parts(din, s);
    return;
  }
  float* dweight = grad_slot(p, 0, s);
  float* dbias = bias_ ? grad_slot(p, 1, s) : nullptr;
  if (s.empty()) {  // an empty slice still writes its slots
    std::fill_n(dweight, std::size_t(shape_.K) * weight_per_channel(), 0.0f);
    if (dbias) std::fill_n(dbias, std::size_t(shape_.K), 0.0f);
    return;
  }
  k.conv2d_backward_weight(dweight, dbias, dout, in, shape(s.size()));
  if (din) k.conv2d_backward_data(din, dout, p.param(param_indices_[0]), shape(s.size()));
}

// ---- split by output channels (--threads; Layer::splits_by_outputs) ----

constexpr int kPartChannels = 32;

std::pair<int, int> Conv2d::channels_of(int part, int parts) const {
  return slice_of(shape_.K, parts, part, kPartChannels);
}

bool Conv2d::splits_by_outputs(int N, int T) const {
  const double weight = double(shape_.K) * weight_per_channel();
  const double input = double(N) * shape_.C * shape_.H * shape_.W;
  return T > 1 && T == threads() && N <= reserved_batch_ && shape_.groups == 1 && shape_.K >= 2 * kPartChannels &&
         weight * T >= input;
}

void Conv2d::reserve(int max_batch) {
  reserved_batch_ = max_batch;
  part_buffer_.clear();
  data_part_.clear();
  if (threads() <= 1) return;
  part_buffer_.resize(std::size_t(threads()));
  data_part_.resize(std::size_t(threads()));
  // The largest batch that splits (splits_by_outputs: its input at most the weight times the threads).
  const std::size_t per_sample = std::size_t(shape_.C) * shape_.H * shape_.W;
  int split_batch = 0;
  while (split_batch < max_batch && splits_by_outputs(split_batch + 1, threads())) ++split_batch;
  for (int t = 0; t < threads(); ++t) {
    const auto [k0, k1] = channels_of(t, threads());
    part_buffer_[std::size_t(t)].resize(std::size_t(max_batch) * (k1 - k0) * shape_.P() * shape_.Q());
    if (k1 > k0) data_part_[std::size_t(t)].resize(std::size_t(split_batch) * per_sample);
  }
}

Conv2d::Part Conv2d::part_of(int part, int parts, int N) {
  const auto [k0, k1] = channels_of(part, parts);
  Part p{k0, k1 - k0, shape(N), std::size_t(k0) * weight_per_channel(), part_buffer_[std::size_t(part)].data()};
  p.shape.K = p.channels;
  return p;
}

namespace {
// Channels [k0, k0 + kt) of N samples between a tensor of K channels and a part's [N][kt][PQ] buffer.
void copy_channels(float* dst, std::size_t dst_K, std::size_t dst_k0, const float* src, std::size_t src_K,
                   std::size_t src_k0, std::size_t kt, int N, std::size_t PQ) {
  for (int n = 0; n < N; ++n)
    std::copy_n(src + (std::size_t(n) * src_K + src_k0) * PQ, kt * PQ, dst + (std::size_t(n) * dst_K + dst_k0) * PQ);
}
}  // namespace

void Conv2d::forward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N, int part,
                          int parts) {
  const Part q = part_of(part, parts, N);
  if (q.channels <= 0) return;
  k.conv2d_forward(q.buffer, in, p.param(param_indices_[0]) + q.weight_offset,
                   bias_ ? p.param(param_indices_[1]) + q.k0 : nullptr, q.shape);
  const std::size_t PQ = std::size_t(shape_.P()) * shape_.Q();
  copy_channels(out, shape_.K, q.k0, q.buffer, q.channels, 0, q.channels, N, PQ);
}

void Conv2d::backward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* dout, int N,
                           int part, int parts, bool input_grad) {
  const Part q = part_of(part, parts, N);
  if (q.channels <= 0) return;
  const std::size_t PQ = std::size_t(shape_.P()) * shape_.Q();
  copy_channels(q.buffer, q.channels, 0, dout, shape_.K, q.k0, q.channels, N, PQ);
  k.conv2d_backward_weight(p.grad(param_indices_[0]) + q.weight_offset,
                           bias_ ? p.grad(param_indices_[1]) + q.k0 : nullptr, q.buffer, in, q.shape);
  // The input gradient's terms from these output channels: their rows of the weight, a contiguous piece.
  if (input_grad)
    k.conv2d_backward_data(data_part_[std::size_t(part)].data(), q.buffer, p.param(param_indices_[0]) + q.weight_offset,
                           q.shape);
}

void Conv2d::add_data_parts(float* din, const Slice& s) const {
  const std::size_t per_sample = std::size_t(shape_.C) * shape_.H * shape_.W;
  const std::size_t at = std::size_t(s.n0) * per_sample, n = std::size_t(s.size()) * per_sample;
  bool first = true;
  for (int t = 0; t < threads(); ++t) {  // in part order: the same bits for a given thread count
    const auto [k0, k1] = channels_of(t, threads());
    if (k1 <= k0) continue;
    const float* d = data_part_[std::size_t(t)].data() + at;
    if (first)
      std::copy_n(d, n, din);
    else
      for (std::size_t e = 0; e < n; ++e) din[e] += d[e];
    first = false;
  }
}

}  // namespace ringtrain::nn
