// TokenLinear: nn.Linear(in_features, out_features) applied to every token of [T, in] -> [T, out] (any
// leading shape: the rows of the last dimension), as one linear op call of N * T rows. Parameters
// <name>.weight [out, in] and <name>.bias [out] with the given Inits (default: nn.Linear's U(+-1/sqrt(in));
// torchvision's ViT MLP passes xavier_uniform_ weights and normal(1e-6) biases).
#pragma once
#include <cstdint>

#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

// How the tensor-parallel twin of a TokenLinear splits it (nn/parallel_token_linear.h), so the whole layer
// sums in the split's order (nn/tp_reduction.h): Column (output features split) chunks its backward-data,
// Row (input features split) its forward; None: plain GEMMs.
enum class TpSplit { None, Column, Row };

class TokenLinear : public Layer {
 public:
  TokenLinear(std::string name, int in_features, int out_features, Init weight_init = Init::fan_in_uniform(),
              Init bias_init = Init::fan_in_uniform(), TpSplit split = TpSplit::None);
  LayerDescription describe() const override { return {LayerDescription::Kind::TokenLinear}; }
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  double forward_macs() const override { return double(rows_) * in_features_ * out_features_; }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  ops::LinearShape shape(int N) const { return {int(N * rows_), in_features_, out_features_}; }
  int in_features_, out_features_;
  Init weight_init_, bias_init_;
  TpSplit split_;
  int64_t rows_ = 0;  // tokens per sample
};

}  // namespace ringtrain::nn
