// ParameterSet: every parameter of a model in one contiguous fp32 buffer, every gradient in another,
// with named views. Views are declared in PyTorch state_dict order (conv1.weight, conv1.bias, ...), so
// the buffer is also the checkpoint order; backward fills it from the end, which is the order gradient
// buckets are all-reduced in.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/tensor.h"
#include "ringtrain/nn/shard.h"

namespace ringtrain::nn {

struct ParamView {
  std::string name;    // PyTorch name, e.g. "fc1.weight"
  Shape shape;         // PyTorch shape, e.g. [120, 400]
  std::size_t offset;  // in floats, into the parameter and gradient buffers
  std::size_t numel;
  int fan_in;          // for PyTorch's default initialisation (of the whole tensor)
  ShardInfo shard;     // how a tensor-parallel shard is cut from the whole tensor (nn/shard.h); default: whole
};

class ParameterSet {
 public:
  // Declares a parameter; returns its index. Only before allocate().
  int declare(const std::string& name, const Shape& shape, int fan_in);
  // Declares shard shard.index of a tensor-parallel parameter: the view holds the shard's shape, the name
  // stays the whole tensor's PyTorch name.
  int declare_shard(const std::string& name, const ShardInfo& shard, int fan_in);
  // Allocates both buffers (64-byte aligned, each view starting on a 16-float boundary).
  void allocate();

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

 private:
  std::vector<ParamView> views_;
  std::size_t next_offset_ = 0;
  AlignedBuffer<float> params_;
  AlignedBuffer<float> grads_;
};

}  // namespace ringtrain::nn
