// Conv2dReluPool: conv2d + bias + ReLU + 2x2 max-pool as one layer (LeNet's convolution blocks).
// Owns "<name>.weight" [K,C,R,S] and "<name>.bias" [K] exactly as Conv2d does, so checkpoints and
// the gradient hook see the same parameters. Runs the KernelTable's fused kernels when the table has
// them (ops/conv_pool.h: one pass over memory, the pooling decision kept as a code per output) and
// otherwise the reference composition conv2d -> relu -> maxpool2d. Runs on slices of a batch
// (Model::set_threads); per-slice weight gradients are summed in slice order.
#pragma once
#include <cstdint>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/partials.h"

namespace ringtrain::nn {

class Conv2dReluPool : public Layer {
 public:
  Conv2dReluPool(std::string name, int in_channels, int out_channels, int kernel, int stride = 1, int pad = 0);
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  void prepare(const ops::KernelTable& k) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void reduce_grads(ParameterSet& p) override;
  ops::Conv2dShape shape(int N) const;

 private:
  // The fused kernels' saved state for slice t of a batch of N (offset and size, in floats).
  std::size_t saved_offset(const ops::KernelTable& k, int N, int t) const;

  ops::Conv2dShape shape_;
  int max_batch_ = 0;
  AlignedBuffer<float> saved_;  // fused path
  GradPartials partials_;
  // Reference composition: conv output, ReLU output, pooling argmax and their gradients.
  AlignedBuffer<float> pre_, act_, dact_;
  AlignedBuffer<uint8_t> argmax_;
};

}  // namespace ringtrain::nn
