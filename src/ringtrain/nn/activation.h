// Parameter-free layers: ReLU and MaxPool2d (window k, stride (default k), -inf padding; PyTorch's floor mode).
#pragma once
#include <cstdint>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}
  LayerDescription describe() const override { return {LayerDescription::Kind::ReLU}; }
  Shape configure(const Shape& in) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int64_t per_sample_ = 0;
};

class MaxPool2d : public Layer {
 public:
  // stride 0: the window (non-overlapping). Throws Error unless 1 <= window <= 16 and 0 <= pad <= window / 2.
  MaxPool2d(std::string name, int kernel, int stride = 0, int pad = 0);
  LayerDescription describe() const override { return {.kind = LayerDescription::Kind::MaxPool2d, .kernel = window_, .stride = stride_, .pad = pad_}; }
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  ops::PoolShape shape(int N) const;
  int64_t out_per_sample() const;
  int window_, stride_, pad_;
  Shape in_;
  AlignedBuffer<uint8_t> argmax_;
};

}  // namespace ringtrain::nn
