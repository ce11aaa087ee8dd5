// PatchEmbedding: a ViT's patch embedding - torchvision's conv_proj (nn.Conv2d(C, D, kernel_size=p,
// stride=p)) followed by the reshape and permute to tokens - as one layer: [C, H, W] -> [(H/p)*(W/p), D].
// The conv's windows tile the image, so it is a linear map of each patch's C*p*p pixels: the layer gathers a
// slice's patches ([T][C*p*p] a sample, in the weight's (c, r, s) order) and runs the table's linear op on
// them, so the tokens come out of the GEMM in their final layout (Conv2d + PatchTokens wrote [D][T] and
// transposed it: two passes over the tokens each way). Owns "<name>.weight" [D, C, p, p] and "<name>.bias" [D]
// exactly as Conv2d does (names, shapes, nn.Conv2d's default init), so checkpoints stay torchvision's.
#pragma once
#include <string>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class PatchEmbedding : public Layer {
 public:
  PatchEmbedding(std::string name, int in_channels, int dim, int patch);
  LayerDescription describe() const override {
    return {.kind = LayerDescription::Kind::PatchEmbedding, .kernel = shape_.R, .stride = shape_.R};
  }
  void declare(ParameterSet& params) override;
  // Throws Error unless the input is [C, H, W] with H and W multiples of the patch size.
  Shape configure(const Shape& in) override;
  void reserve(int max_batch) override;
  double forward_macs() const override { return shape_.macs(); }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;

 private:
  int tokens() const { return shape_.P() * shape_.Q(); }
  int patch_floats() const { return shape_.C * shape_.R * shape_.S; }
  ops::LinearShape linear_shape(int N) const { return {N * tokens(), patch_floats(), shape_.K}; }
  // The slice's patches [n][T][C*p*p] <- its images [n][C][H][W], and back (a permutation both ways).
  void gather(float* patches, const float* images, int n) const;
  void scatter(float* images, const float* patches, int n) const;
  template <class F>
  void each_patch_row(int n, F&& f) const;

  ops::Conv2dShape shape_;  // the conv it computes (N = 1)
  // A slice's patches at its first sample (gathered again in backward: cheaper than keeping them), and the
  // backward's patch gradient when an input gradient is asked for.
  AlignedBuffer<float> patches_, dpatches_;
};

}  // namespace ringtrain::nn
