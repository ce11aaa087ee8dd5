// ParameterSet: every parameter of a model in one contiguous fp32 buffer, every gradient in another,
// with named views. Views are declared in PyTorch state_dict order (conv1.weight, conv1.bias, ...), so
// the buffer is also the checkpoint order; backward fills it from the end, which is the order gradient
// buckets are all-reduced in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/tensor.h"
#include "ringtrain/nn/shard.h"

namespace ringtrain::nn {

// How a parameter tensor is initialised (Model::init_parameters), as PyTorch / torchvision do it for the
// module that owns it. Every kind draws from the model's one Rng, tensor by tensor in declaration order.
struct Init {
  enum Kind {
    FanInUniform,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): nn.Linear / nn.Conv2d defaults (weight and bias)
    Uniform,       // U(-a, a) (xavier_uniform_: a = sqrt(6 / (fan_in + fan_out)))
    Normal,        // N(0, a^2) (kaiming_normal_: a = sqrt(2 / fan_out); normal_(std=a))
    TruncNormal,   // N(0, a^2) redrawn outside [-2, 2] (torch.nn.init.trunc_normal_'s absolute bounds)
    Constant,      // every element a (zeros_, ones_)
  };
  Kind kind = FanInUniform;
  double a = 0.0;
  static Init fan_in_uniform() { return {}; }
  static Init uniform(double bound) { return {Uniform, bound}; }
  static Init normal(double std) { return {Normal, std}; }
  static Init trunc_normal(double std) { return {TruncNormal, std}; }
  static Init constant(double value) { return {Constant, value}; }
};

struct ParamView {
  std::string name;    // PyTorch name, e.g. "fc1.weight"
  Shape shape;         // PyTorch shape, e.g. [120, 400]
  std::size_t offset;  // in floats, into the parameter and gradient buffers
  std::size_t numel;
  int fan_in;          // for PyTorch's default initialisation (of the whole tensor)
  ShardInfo shard;     // how a tensor-parallel shard is cut from the whole tensor (nn/shard.h); default: whole
  Init init;           // how Model::init_parameters fills it
};

// A non-trainable tensor that checkpoints carry (batch norm's running_mean / running_var as F32, its
// num_batches_tracked as I64): saved and loaded with the weights, never optimized or all-reduced.
struct BufferView {
  std::string name;    // PyTorch name, e.g. "layer1.0.bn1.running_mean"
  Shape shape;         // PyTorch shape ([] for a scalar)
  std::size_t offset;  // into the float buffer (F32) or the counter array (I64)
  std::size_t numel;
  bool int64;          // an I64 counter (num_batches_tracked) instead of F32 values
  double initial;      // the value reset_buffers() writes (running_var: 1)
};

class ParameterSet {
 public:
  // Declares a parameter; returns its index. Only before allocate().
  int declare(const std::string& name, const Shape& shape, int fan_in, Init init = {});
  // Declares shard shard.index of a tensor-parallel parameter: the view holds the shard's shape, the name
  // stays the whole tensor's PyTorch name. (A sharded model takes its weights cut from a whole one; init
  // says what the whole tensor's would be.)
  int declare_shard(const std::string& name, const ShardInfo& shard, int fan_in, Init init = {});
  // Declares a non-trainable F32 buffer (all elements `initial`) or an I64 counter; returns its index.
  int declare_buffer(const std::string& name, const Shape& shape, double initial);
  int declare_counter(const std::string& name);
  // Allocates both buffers (64-byte aligned, each view starting on a 16-float boundary) and the
  // non-trainable buffers (set to their initial values).
  void allocate();
  // Sets every non-trainable buffer back to its initial value.
  void reset_buffers();

  std::size_t size() const { return params_.size(); }  // floats, including alignment padding
  std::size_t count() const;                            // real parameters, without padding
  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(const std::string& name) const;

  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  float* param(int index) { return params_.data() + views_[index].offset; }
  float* grad(int index) { return grads_.data() + views_[index].offset; }

  // Non-trainable buffers: the F32 ones in one contiguous array, the I64 counters in another.
  const std::vector<BufferView>& buffer_views() const { return buffer_views_; }
  float* buffer(int index) { return buffers_.data() + buffer_views_[index].offset; }
  int64_t* counter(int index) { return counters_.data() + buffer_views_[index].offset; }
  float* buffers() { return buffers_.data(); }
  const float* buffers() const { return buffers_.data(); }
  std::size_t buffer_floats() const { return buffers_.size(); }
  int64_t* counters() { return counters_.data(); }
  const int64_t* counters() const { return counters_.data(); }
  std::size_t counter_count() const { return counters_.size(); }

 private:
  std::vector<ParamView> views_;
  std::size_t next_offset_ = 0;
  AlignedBuffer<float> params_;
  AlignedBuffer<float> grads_;
  std::vector<BufferView> buffer_views_;
  std::size_t next_buffer_ = 0, next_counter_ = 0;
  AlignedBuffer<float> buffers_;
  std::vector<int64_t> counters_;
};

}  // namespace ringtrain::nn
