// Linear layer: weight [O,I], bias [O] (PyTorch's nn.Linear). Flattens its input, so it follows a
// convolution directly (PyTorch's torch.flatten(x, 1) order: C, then H, then W). Runs on slices of a
// batch (Model::set_threads); per-slice weight gradients are summed in slice order.
#pragma once
#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/partials.h"

namespace ringtrain::nn {

class Linear : public Layer {
 public:
  // Initialised as nn.Linear by default (weight and bias U(+-1/sqrt(in_features))).
  Linear(std::string name, int in_features, int out_features, Init weight_init = Init::fan_in_uniform(),
         Init bias_init = Init::fan_in_uniform());
  LayerDescription describe() const override { return {LayerDescription::Kind::Linear}; }
  double forward_macs() const override { return double(in_features_) * out_features_; }
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void reduce_grads(ParameterSet& p, int part, int parts) override;

 private:
  int in_features_, out_features_;
  Init weight_init_, bias_init_;
  GradPartials partials_;
};

}  // namespace ringtrain::nn
