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
  LayerDescription describe() const override {
    return {.kind = LayerDescription::Kind::Conv2dReluPool, .kernel = shape_.R, .stride = shape_.stride, .pad = shape_.pad};
  }
  void declare(ParameterSet& params) override;
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  void prepare(const ops::KernelTable& k) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void reduce_grads(ParameterSet& p, int part, int parts) override;
  ops::Conv2dShape shape(int N) const;
  double forward_macs() const override { return shape(1).macs(); }
  // Declares that this layer's output is `next`'s input and nothing else reads it (LeNet's conv1 -> conv2):
  // where the kernel table takes blocked activations for both shapes (KernelTable::conv2d_relu_pool_blocked,
  // ops/conv_pool.h), that activation and its gradient stay in the kernels' blocked layout and 16-bit type -
  // no transposes out of one kernel and back into the next, half the bytes. The layers' results are the same
  // bits either way. next must outlive this layer.
  void chain_to(Conv2dReluPool& next);
  // A pipeline cut between two chained layers unchains them: the activation then crosses in the plain layout.
  void drop_links_outside(const std::function<bool(const Layer*)>& inside) override;

 private:
  // Whether the activation to next_ (from prev_) is blocked for a batch (slice) of N with table k.
  bool blocked_out(const ops::KernelTable& k, int N) const;
  bool blocked_in(const ops::KernelTable& k, int N) const { return prev_ && prev_->blocked_out(k, N); }
  // The shape the fused kernels get: shape(N) with the blocked flags.
  ops::Conv2dShape fused_shape(const ops::KernelTable& k, int N) const;

  // The fused kernels' saved state for slice t of a batch of N (offset and size, in floats). Sized for the
  // plain layout, which bounds the blocked one (a blocked unpadded input keeps no copy there), so what
  // reserve() sets aside for its batch fits every smaller slice, blocked or not.
  std::size_t saved_offset(const ops::KernelTable& k, int N, int t) const;

  ops::Conv2dShape shape_;
  Conv2dReluPool* next_ = nullptr;
  const Conv2dReluPool* prev_ = nullptr;
  int max_batch_ = 0;
  AlignedBuffer<float> saved_;  // fused path
  GradPartials partials_;
  // Reference composition: conv output, ReLU output, pooling argmax and their gradients.
  AlignedBuffer<float> pre_, act_, dact_;
  AlignedBuffer<uint8_t> argmax_;
};

}  // namespace ringtrain::nn
