// The token plumbing of torchvision's VisionTransformer, per sample:
//   PatchTokens        [D, h, w] -> [h*w, D]   (x.reshape(n, D, h*w).permute(0, 2, 1) after conv_proj)
//   ClassToken         [T, D] -> [T+1, D]      (torch.cat([class_token.expand(n, -1, -1), x], dim=1));
//                      parameter named exactly <name> ("class_token") [1, 1, D], zeros
//   PositionEmbedding  [T, D] + pos [1, T, D]  (Encoder: input + pos_embedding); parameter named exactly
//                      <name> ("encoder.pos_embedding"), normal(std=0.02)
//   SelectToken        [T, D] -> [D]           (x[:, index]: the class token, index 0)
// All run on slices; parameter gradients are the slice's sum over samples (in sample order) in grad_slot().
// forward_macs: PositionEmbedding one add per value, the others none (data movement).
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

// Whole-batch calls as one slice, and slices on by default.
class TokenLayer : public Layer {
 public:
  using Layer::Layer;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override {
    forward_slice(k, p, in, out, {N, 0, N, 0});
  }
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override {
    backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
  }
  bool supports_slices() const override { return true; }
};

class PatchTokens : public TokenLayer {
 public:
  explicit PatchTokens(std::string name) : TokenLayer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::PatchTokens}; }
  Shape configure(const Shape& in) override;
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int dim_ = 0, tokens_ = 0;
};

class ClassToken : public TokenLayer {
 public:
  ClassToken(std::string name, int dim);
  LayerDescription describe() const override { return {LayerDescription::Kind::ClassToken}; }
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int dim_, tokens_ = 0;  // tokens of the input
};

class PositionEmbedding : public TokenLayer {
 public:
  PositionEmbedding(std::string name, int tokens, int dim);
  LayerDescription describe() const override { return {LayerDescription::Kind::PositionEmbedding}; }
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  double forward_macs() const override { return double(tokens_) * dim_; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int tokens_, dim_;
};

class SelectToken : public TokenLayer {
 public:
  SelectToken(std::string name, int index);
  LayerDescription describe() const override { return {.kind = LayerDescription::Kind::SelectToken, .index = index_}; }
  Shape configure(const Shape& in) override;
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int index_, tokens_ = 0, dim_ = 0;
};

}  // namespace ringtrain::nn
