// LayerNorm (torch.nn.LayerNorm(dim, eps)) over the last dimension of [..., dim]: parameters <name>.weight (1)
// and <name>.bias (0). Per-row mean and 1/std are kept for backward in layer-owned buffers sized in reserve(),
// indexed by sample, so slices of a batch (threads) never share them.
#pragma once
#include <cstdint>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/ops/layer_norm.h"

namespace ringtrain::nn {

class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, int dim, double eps);
  LayerDescription describe() const override { return {.kind = LayerDescription::Kind::LayerNorm, .eps = eps_}; }
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  void reserve(int max_batch) override;
  // One multiply-add per value (the affine map; the statistics are comparable in count).
  double forward_macs() const override { return double(rows_) * dim_; }
  bool supports_slices() const override { return true; }
  bool accumulates_input_grad() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int dim_;
  double eps_;
  int64_t rows_ = 0;  // rows of dim per sample
  AlignedBuffer<float> mean_, rstd_;
};

}  // namespace ringtrain::nn
