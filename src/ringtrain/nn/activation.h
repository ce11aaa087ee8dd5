// Parameter-free layers: ReLU and MaxPool2d (window k, stride k).
#pragma once
#include <cstdint>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}
  Shape configure(const Shape& in) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
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
  MaxPool2d(std::string name, int window) : Layer(std::move(name)), window_(window) {}
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) override;
  void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                float* din, int N) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  ops::PoolShape shape(int N) const;
  int window_;
  Shape in_;
  AlignedBuffer<uint8_t> argmax_;
};

}  // namespace ringtrain::nn
