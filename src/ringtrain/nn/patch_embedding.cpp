#include "ringtrain/nn/patch_embedding.h"

#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/conv2d.h"

namespace ringtrain::nn {

PatchEmbedding::PatchEmbedding(std::string name, int in_channels, int dim, int patch)
    : Layer(std::move(name)), shape_(conv_shape(in_channels, dim, patch, patch, 0)) {}

void PatchEmbedding::declare(ParameterSet& params) { param_indices_ = declare_conv_params(params, name_, shape_); }

Shape PatchEmbedding::configure(const Shape& in) {
  configure_conv_input(shape_, in, name_);
  check(shape_.H % shape_.R == 0 && shape_.W % shape_.S == 0,
        name_ + ": the " + std::to_string(shape_.R) + "x" + std::to_string(shape_.S) + " patches do not tile the " +
            std::to_string(shape_.H) + "x" + std::to_string(shape_.W) + " input");
  return {tokens(), shape_.K};
}

void PatchEmbedding::reserve(int max_batch) {
  patches_.resize(std::size_t(max_batch) * tokens() * patch_floats());
  dpatches_.resize(patches_.size());
}

// Patch (p, q) of channel c is rows p*R .. p*R+R-1, columns q*S .. q*S+S-1: its row r is S floats in a row of
// the image, and patch row c*R*S + r*S. f(image offset, patch offset) for each such run of S floats.
template <class F>
void PatchEmbedding::each_patch_row(int n, F&& f) const {
  const int C = shape_.C, H = shape_.H, W = shape_.W, R = shape_.R, S = shape_.S, P = shape_.P(), Q = shape_.Q();
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p)
        for (int r = 0; r < R; ++r) {
          const std::size_t row = ((std::size_t(i) * C + c) * H + p * R + r) * W;
          const std::size_t patch = (std::size_t(i) * P + p) * Q * patch_floats() + (c * R + r) * S;
          for (int q = 0; q < Q; ++q) f(row + std::size_t(q) * S, patch + std::size_t(q) * patch_floats());
        }
}

void PatchEmbedding::gather(float* patches, const float* images, int n) const {
  each_patch_row(n, [&](std::size_t pixel, std::size_t at) {
    for (int s = 0; s < shape_.S; ++s) patches[at + s] = images[pixel + s];
  });
}

void PatchEmbedding::scatter(float* images, const float* patches, int n) const {
  each_patch_row(n, [&](std::size_t pixel, std::size_t at) {
    for (int s = 0; s < shape_.S; ++s) images[pixel + s] = patches[at + s];
  });
}

void PatchEmbedding::forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out,
                                   const Slice& s) {
  if (s.empty()) return;
  float* patches = patches_.data() + std::size_t(s.n0) * tokens() * patch_floats();
  gather(patches, in, s.size());
  k.linear_forward(out, patches, p.param(param_indices_[0]), p.param(param_indices_[1]), linear_shape(s.size()));
}

void PatchEmbedding::backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float*,
                                    const float* dout, float* din, const Slice& s) {
  float* dweight = grad_slot(p, 0, s);
  float* dbias = grad_slot(p, 1, s);
  if (s.empty()) {
    std::memset(dweight, 0, std::size_t(shape_.K) * patch_floats() * sizeof(float));
    std::memset(dbias, 0, std::size_t(shape_.K) * sizeof(float));
    return;
  }
  const std::size_t at = std::size_t(s.n0) * tokens() * patch_floats();
  float* patches = patches_.data() + at;
  gather(patches, in, s.size());
  float* dpatches = din ? dpatches_.data() + at : nullptr;
  k.linear_backward(dpatches, dweight, dbias, dout, patches, p.param(param_indices_[0]), linear_shape(s.size()));
  if (din) scatter(din, dpatches, s.size());
}

}  // namespace ringtrain::nn
