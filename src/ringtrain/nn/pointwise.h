// Parameter-free activations of the zoo: ReLU6 (mobilenet_v2) and exact GELU (ViT's MLP), on any shape.
// Both run on slices of a batch. forward_macs: ReLU6 counts nothing (a comparison, as ReLU); GELU one
// operation per value.
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

// The shared plumbing: whole-batch calls as one slice, the per-sample size.
class PointwiseLayer : public Layer {
 public:
  using Layer::Layer;
  Shape configure(const Shape& in) override {
    per_sample_ = shape_numel(in);
    return in;
  }
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override {
    forward_slice(k, p, in, out, {N, 0, N, 0});
  }
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override {
    backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
  }
  bool supports_slices() const override { return true; }

 protected:
  int64_t per_sample_ = 0;
};

class ReLU6 : public PointwiseLayer {
 public:
  explicit ReLU6(std::string name) : PointwiseLayer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::ReLU6}; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
};

class GELU : public PointwiseLayer {
 public:
  explicit GELU(std::string name) : PointwiseLayer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::GELU}; }
  double forward_macs() const override { return double(per_sample_); }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
};

}  // namespace ringtrain::nn
