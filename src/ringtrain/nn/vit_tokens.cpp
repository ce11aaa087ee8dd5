#include "ringtrain/nn/vit_tokens.h"

#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

// ---- PatchTokens: a per-sample transpose [D][T] <-> [T][D] ----
Shape PatchTokens::configure(const Shape& in) {
  check(in.size() == 3, name_ + ": expects [D, h, w], got " + shape_str(in));
  dim_ = int(in[0]);
  tokens_ = int(in[1] * in[2]);
  return {tokens_, dim_};
}

void PatchTokens::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  k.transpose_samples(out, in, s.size(), dim_, tokens_);
}

void PatchTokens::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float*, const float* dout,
                                 float* din, const Slice& s) {
  if (din) k.transpose_samples(din, dout, s.size(), tokens_, dim_);
}

// ---- ClassToken ----
ClassToken::ClassToken(std::string name, int dim) : TokenLayer(std::move(name)), dim_(dim) {}

Shape ClassToken::configure(const Shape& in) {
  check(in.size() == 2 && in[1] == dim_, name_ + ": expects [T, " + std::to_string(dim_) + "], got " + shape_str(in));
  tokens_ = int(in[0]);
  return {tokens_ + 1, dim_};
}

void ClassToken::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_, {1, 1, dim_}, dim_, Init::constant(0.0))};
}

void ClassToken::forward_slice(const ops::KernelTable&, ParameterSet& p, const float* in, float* out, const Slice& s) {
  const float* token = p.param(param_indices_[0]);
  const std::size_t in_per = std::size_t(tokens_) * dim_, out_per = in_per + dim_;
  for (int n = 0; n < s.size(); ++n) {
    std::memcpy(out + n * out_per, token, std::size_t(dim_) * sizeof(float));
    std::memcpy(out + n * out_per + dim_, in + n * in_per, in_per * sizeof(float));
  }
}

void ClassToken::backward_slice(const ops::KernelTable&, ParameterSet& p, const float*, const float*, const float* dout,
                                float* din, const Slice& s) {
  float* dtoken = grad_slot(p, 0, s);
  const std::size_t in_per = std::size_t(tokens_) * dim_, out_per = in_per + dim_;
  std::memset(dtoken, 0, std::size_t(dim_) * sizeof(float));
  for (int n = 0; n < s.size(); ++n) {
    for (int d = 0; d < dim_; ++d) dtoken[d] += dout[n * out_per + d];
    if (din) std::memcpy(din + n * in_per, dout + n * out_per + dim_, in_per * sizeof(float));
  }
}

// ---- PositionEmbedding ----
PositionEmbedding::PositionEmbedding(std::string name, int tokens, int dim)
    : TokenLayer(std::move(name)), tokens_(tokens), dim_(dim) {}

Shape PositionEmbedding::configure(const Shape& in) {
  check(in.size() == 2 && in[0] == tokens_ && in[1] == dim_, name_ + ": expects [" + std::to_string(tokens_) + ", " +
                                                                 std::to_string(dim_) + "], got " + shape_str(in));
  return in;
}

void PositionEmbedding::declare(ParameterSet& params) {
  param_indices_ = {params.declare(name_, {1, tokens_, dim_}, dim_, Init::normal(0.02))};
}

void PositionEmbedding::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                      const Slice& s) {
  const float* pos = p.param(param_indices_[0]);
  const std::size_t per = std::size_t(tokens_) * dim_;
  for (int n = 0; n < s.size(); ++n) k.add_forward(out + n * per, in + n * per, pos, int64_t(per));
}

void PositionEmbedding::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float*, const float*,
                                       const float* dout, float* din, const Slice& s) {
  float* dpos = grad_slot(p, 0, s);
  const std::size_t per = std::size_t(tokens_) * dim_;
  std::memset(dpos, 0, per * sizeof(float));
  for (int n = 0; n < s.size(); ++n) k.add_forward(dpos, dpos, dout + n * per, int64_t(per));
  if (din && s.size() > 0) std::memcpy(din, dout, std::size_t(s.size()) * per * sizeof(float));
}

// ---- SelectToken ----
SelectToken::SelectToken(std::string name, int index) : TokenLayer(std::move(name)), index_(index) {}

Shape SelectToken::configure(const Shape& in) {
  check(in.size() == 2 && index_ >= 0 && index_ < in[0],
        name_ + ": expects [T, D] with token " + std::to_string(index_) + ", got " + shape_str(in));
  tokens_ = int(in[0]);
  dim_ = int(in[1]);
  return {dim_};
}

void SelectToken::forward_slice(const ops::KernelTable&, ParameterSet&, const float* in, float* out, const Slice& s) {
  const std::size_t per = std::size_t(tokens_) * dim_;
  for (int n = 0; n < s.size(); ++n)
    std::memcpy(out + std::size_t(n) * dim_, in + n * per + std::size_t(index_) * dim_, std::size_t(dim_) * sizeof(float));
}

void SelectToken::backward_slice(const ops::KernelTable&, ParameterSet&, const float*, const float*, const float* dout,
                                 float* din, const Slice& s) {
  if (!din) return;
  const std::size_t per = std::size_t(tokens_) * dim_;
  if (s.size() > 0) std::memset(din, 0, std::size_t(s.size()) * per * sizeof(float));
  for (int n = 0; n < s.size(); ++n)
    std::memcpy(din + n * per + std::size_t(index_) * dim_, dout + std::size_t(n) * dim_, std::size_t(dim_) * sizeof(float));
}

}  // namespace ringtrain::nn
