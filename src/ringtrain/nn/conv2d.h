// Conv2d layer: weight [K,C/groups,R,S] and (optional) bias [K], stride, zero padding and groups (PyTorch's
// nn.Conv2d; groups == in == out channels is a depthwise conv). Runs on slices of a batch
// (Model::set_threads); per-slice weight gradients go to grad_slot() and are summed in slice order, except
// where the threads split the conv by output channels instead (splits_by_outputs: large weights, small maps).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/partials.h"

namespace ringtrain::nn {

// The pieces every convolution layer shares (Conv2d, Conv2dReluPool): its shape from the constructor's
// arguments, its PyTorch-named parameters, and the check of the per-sample input [C,H,W].
ops::Conv2dShape conv_shape(int in_channels, int out_channels, int kernel, int stride, int pad, int groups = 1);
// "<name>.weight" [K,C/groups,R,S] and, with bias, "<name>.bias" [K]; fan_in = C/groups * R * S as in PyTorch.
std::vector<int> declare_conv_params(ParameterSet& params, const std::string& name, const ops::Conv2dShape& s,
                                     bool bias = true, Init weight_init = Init::fan_in_uniform(),
                                     Init bias_init = Init::fan_in_uniform());
void configure_conv_input(ops::Conv2dShape& s, const Shape& in, const std::string& name);
// s with batch N.
inline ops::Conv2dShape with_batch(ops::Conv2dShape s, int N) {
  s.N = N;
  return s;
}

class Conv2d : public Layer {
 public:
  // Throws Error unless groups divides both channel counts.
  Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride = 1, int pad = 0, int groups = 1,
         bool bias = true, Init weight_init = Init::fan_in_uniform(), Init bias_init = Init::fan_in_uniform());
  LayerDescription describe() const override {
    return {.kind = LayerDescription::Kind::Conv2d, .kernel = shape_.R, .stride = shape_.stride, .pad = shape_.pad, .groups = shape_.groups};
  }
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  double forward_macs() const override { return shape_.macs(); }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  // By output channels when the weight is at least the batch's input over T (resnet18 from layer2's 3x3 convs
  // on: the partials' sum would move more than reading the input once a part), groups 1, K >= 2 blocks.
  bool splits_by_outputs(int N, int T) const override;
  void forward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N, int part,
                    int parts) override;
  void backward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* dout, int N, int part,
                     int parts, bool input_grad) override;
  void reserve(int max_batch) override;
  ops::Conv2dShape shape(int N) const;
  bool has_bias() const { return bias_; }

 private:
  // Output channels [k0, k1) of part `part` (whole 32-channel blocks: a vector block on every ISA).
  std::pair<int, int> channels_of(int part, int parts) const;
  // One part of the split for a batch of N: its channels [k0, k0 + channels), the kernels' shape for them,
  // where its output channels start in the weight, and its buffer.
  struct Part {
    int k0, channels;
    ops::Conv2dShape shape;
    std::size_t weight_offset;
    float* buffer;
  };
  Part part_of(int part, int parts, int N);
  // din (slice s's samples) <- the sum of the parts' shares of the input gradient (backward_part).
  void add_data_parts(float* din, const Slice& s) const;
  // Floats of one output channel's weight (C/groups * R * S).
  std::size_t weight_per_channel() const { return std::size_t(shape_.Cg()) * shape_.R * shape_.S; }
  ops::Conv2dShape shape_;
  // Per part: its output channels' out (forward) or dout (backward), [N][k1 - k0][P*Q]: the kernels take
  // whole samples.
  std::vector<AlignedBuffer<float>> part_buffer_;
  // Per part: its output channels' share of the input gradient, [N][C][H*W] (backward_part; the largest batch
  // that splits: no more floats than the weight has times the threads).
  std::vector<AlignedBuffer<float>> data_part_;
  int reserved_batch_ = 0;
  bool bias_;
  Init weight_init_, bias_init_;
};

}  // namespace ringtrain::nn
