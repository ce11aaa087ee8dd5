// The transformer MLP's linears split over a tensor group (Megatron-LM): TokenLinear (nn/token_linear.h)
// on a shard, with no communication of their own - the region's f and g (nn/tp_regions.h) do it:
//
//   ColumnParallelTokenLinear  weight [O, I] cut by rows (output features), bias cut alike:
//                              out_r [.., O_r] = x W_r^T + b_r (x whole); dx_r = dout_r W_r is a partial
//                              sum that f before it all-reduces.
//   RowParallelTokenLinear     weight [O, I] cut by columns (input features), no bias: out [.., O] =
//                              x_r W_r^T is a partial sum that g after it all-reduces; the bias follows g
//                              (TokenBias, nn/token_bias.h), added once.
//
// Under an even split both sum as the whole TokenLinear (TpSplit) does, chunk by chunk (nn/tp_reduction.h),
// so vit under --tp computes one process's bits. Both keep PyTorch's names ("<name>.weight", "<name>.bias") with the shard's shape (nn/shard.h); they
// run on thread slices like TokenLinear. bounds: the split of the cut dimension; empty: even_split.
#pragma once
#include <cstdint>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/nn/parallel_linear.h"

namespace ringtrain::nn {

class ColumnParallelTokenLinear : public Layer {
 public:
  ColumnParallelTokenLinear(std::string name, int in_features, int out_features, const TensorGroup& group,
                            std::vector<int64_t> bounds = {}, Init weight_init = Init::fan_in_uniform(),
                            Init bias_init = Init::fan_in_uniform());
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  double forward_macs() const override { return double(rows_) * in_features_ * local_out(); }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  int local_out() const { return int(bounds_[std::size_t(rank_) + 1] - bounds_[std::size_t(rank_)]); }

 private:
  int in_features_, out_features_, rank_;
  std::vector<int64_t> bounds_;
  Init weight_init_, bias_init_;
  int chunks_ = 0;  // this shard's chunks of the split sum (nn/tp_reduction.h); 0: plain GEMMs
  int64_t rows_ = 0;
};

class RowParallelTokenLinear : public Layer {
 public:
  RowParallelTokenLinear(std::string name, int in_features, int out_features, const TensorGroup& group,
                         std::vector<int64_t> bounds = {}, Init weight_init = Init::fan_in_uniform());
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  double forward_macs() const override { return double(rows_) * local_in() * out_features_; }
  bool supports_slices() const override { return true; }
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  int local_in() const { return int(bounds_[std::size_t(rank_) + 1] - bounds_[std::size_t(rank_)]); }

 private:
  int in_features_, out_features_, rank_;
  std::vector<int64_t> bounds_;
  Init weight_init_;
  int chunks_ = 0;  // as ColumnParallelTokenLinear's
  int64_t rows_ = 0;
  AlignedBuffer<float> zero_bias_;  // the partial products take no bias (TokenBias adds it after g)
};

// bounds, or an even split of D over T when empty (checked either way); shared by the parallel layers.
std::vector<int64_t> split_or_even(std::vector<int64_t> bounds, int64_t D, int T, const std::string& what);

}  // namespace ringtrain::nn
