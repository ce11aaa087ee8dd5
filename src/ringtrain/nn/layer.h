// Layer: the unit a Model is built from. A layer declares its parameters in the model's
// ParameterSet, learns its per-sample input shape once (configure), then runs forward and backward
// through a KernelTable on batches of N samples. Activations are owned by the Model.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/tensor.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/nn/parameters.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::nn {

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }

  // Registers this layer's parameters (PyTorch names "<layer>.weight", "<layer>.bias").
  virtual void declare(ParameterSet& params) {}
  // Given the per-sample input shape, returns the per-sample output shape.
  virtual Shape configure(const Shape& in) = 0;
  // Sizes per-batch workspaces (e.g. pooling's argmax) for batches up to max_batch.
  virtual void reserve(int max_batch) {}
  virtual void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) = 0;
  // Writes parameter gradients into p.grads() and, when din is not null, the input gradient.
  virtual void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                        const float* dout, float* din, int N) = 0;
  // Indices into the ParameterSet of the parameters this layer owns.
  const std::vector<int>& param_indices() const { return param_indices_; }
  // Threads that split this layer's batch (Model::set_threads; call reserve afterwards). Null: the caller's.
  void set_thread_pool(ThreadPool* pool) { pool_ = pool; }

 protected:
  int threads() const { return pool_ ? pool_->size() : 1; }
  ThreadPool* pool_ = nullptr;
  std::string name_;
  std::vector<int> param_indices_;
};

using LayerList = std::vector<std::unique_ptr<Layer>>;

}  // namespace ringtrain::nn
