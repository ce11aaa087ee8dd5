// BatchNorm2d (torch.nn.BatchNorm2d(channels, eps, momentum)) on [C, H, W]: parameters <name>.weight (1),
// <name>.bias (0); buffers <name>.running_mean (0), <name>.running_var (1) and the I64 counter
// <name>.num_batches_tracked. Training mode normalises with the batch's statistics (the whole batch at
// once: needs_whole_batch(), so the model calls it between sliced runs; with --threads T it splits the
// channels over the model's T threads instead, each channel's statistics being its own), updates the
// running statistics (unbiased variance, momentum) and counts the batch; eval mode uses the running
// statistics and runs on slices like any per-sample layer.
// `activation` fuses the ReLU or ReLU6 that follows it in torchvision's blocks (ops/batch_norm.h): the layer
// then outputs the activation's value, with the same bits as the two layers, one pass over memory fewer
// each way; the activation has no parameters, so checkpoints and state_dict names are unchanged.
#pragma once
#include <tuple>

#include "ringtrain/core/aligned.h"
#include "ringtrain/nn/layer.h"
#include "ringtrain/ops/batch_norm.h"

namespace ringtrain::nn {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(std::string name, int channels, double eps = 1e-5, double momentum = 0.1,
              ops::BnActivation activation = ops::BnActivation::None);
  LayerDescription describe() const override;
  Shape configure(const Shape& in) override;
  void declare(ParameterSet& params) override;
  void reserve(int max_batch) override;
  // One multiply-add per value (the normalisation folded into a per-channel scale and shift).
  double forward_macs() const override { return double(channels_) * hw_; }
  bool supports_slices() const override { return true; }
  bool needs_whole_batch() const override { return training(); }
  // In training mode a slice must be the whole batch (the statistics are over the batch).
  void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s) override;
  void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out, const float* dout,
                      float* din, const Slice& s) override;
  void set_thread_pool(ThreadPool* pool) override { pool_ = pool; }

 private:
  ops::BatchNormShape shape(int N) const { return {N, channels_, hw_, activation_}; }
  // Runs pass(shape) on the pool's threads, each on its run of channels (the whole of them without a pool).
  template <class Pass>
  void by_channels(int N, Pass&& pass) {
    const int T = pool_ ? pool_->size() : 1;
    parallel_run(pool_, [&](int t) {
      ops::BatchNormShape s = shape(N);
      std::tie(s.c_begin, s.c_end) = slice_of(channels_, T, t, 1);
      if (s.c_begin < s.c_end) pass(s);
    });
  }
  ThreadPool* pool_ = nullptr;
  void require_whole(const Slice& s) const;
  int channels_;
  double eps_, momentum_;
  ops::BnActivation activation_;
  int hw_ = 0;
  int running_mean_ = -1, running_var_ = -1, tracked_ = -1;  // buffer indices
  AlignedBuffer<float> save_mean_, save_invstd_;             // the last training forward's statistics
};

}  // namespace ringtrain::nn
