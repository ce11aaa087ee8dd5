// AdaptiveAvgPool2d to 1x1 (PyTorch's nn.AdaptiveAvgPool2d((1, 1)), the global average before a
// classifier): [C,H,W] -> [C,1,1], each channel the mean of its plane. No parameters; runs on slices.
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class AdaptiveAvgPool2d : public Layer {
 public:
  explicit AdaptiveAvgPool2d(std::string name) : Layer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::GlobalAveragePool}; }
  Shape configure(const Shape& in) override;
  double forward_macs() const override { return double(channels_) * plane_; }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int64_t channels_ = 0;
  int plane_ = 0;  // H * W
};

}  // namespace ringtrain::nn
