// TokenBias: y = x + bias on every row of the last dimension ([..., features]); parameter <name>.bias
// [features]. The bias of a row-parallel layer under tensor parallelism, added once after the group's sum
// (ReduceFromTensorGroup, nn/tp_regions.h) rather than T times before it: named "<layer>" so that the
// parameter keeps the PyTorch name of the layer it belongs to ("...mlp.3" -> "...mlp.3.bias").
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class TokenBias : public Layer {
 public:
  TokenBias(std::string name, int features, Init init = Init::constant(0.0), int fan_in = 1);
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int features_, fan_in_;
  Init init_;
  int64_t rows_ = 0;  // rows per sample
};

}  // namespace ringtrain::nn
