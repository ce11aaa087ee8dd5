// Layers between blocks: Add (a residual sum of two values of the same shape), Dropout (torch.nn.Dropout(p):
// the mask a pure function of the step context - seed, step, each sample's dataset index - the element and
// the layer's name, so the backward recomputes it; identity in eval mode) and Flatten ([C,H,W] -> [C*H*W], a copy).
// All run on slices of a batch. forward_macs: one operation per value for Add and Dropout, none for Flatten.
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class Add : public Layer {
 public:
  explicit Add(std::string name) : Layer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::Add}; }
  int num_inputs() const override { return 2; }
  Shape configure(const Shape& in) override;
  Shape configure_inputs(const std::vector<Shape>& in) override;
  double forward_macs() const override { return double(per_sample_); }
  // (single-input entry points: refused, Add reads two values)
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  void forward_inputs(const ops::KernelTable& k, ParameterSet& p, const float* const* in, float* out,
                      const Slice& s) override;
  void backward_inputs(const ops::KernelTable& k, ParameterSet& p, const float* const* in, const float* out,
                       const float* dout, float* const* din, const Slice& s) override;
  bool supports_slices() const override { return true; }
  bool passes_gradient_through() const override { return true; }

 private:
  int64_t per_sample_ = 0;
};

class Dropout : public Layer {
 public:
  Dropout(std::string name, double p);
  LayerDescription describe() const override { return {LayerDescription::Kind::Dropout}; }
  void set_p(double p);
  double p() const { return p_; }
  Shape configure(const Shape& in) override;
  double forward_macs() const override { return double(per_sample_); }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  // Applies the slice's mask (training) or copies (eval, p = 0) from src to dst.
  void apply(const ops::KernelTable& k, float* dst, const float* src, const Slice& s) const;
  double p_;
  uint64_t salt_;  // from the name: each dropout layer its own masks
  int64_t per_sample_ = 0;
};

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::Flatten}; }
  Shape configure(const Shape& in) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int64_t per_sample_ = 0;
};

}  // namespace ringtrain::nn
