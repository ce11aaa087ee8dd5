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

// Slices of a batch start on multiples of 16 samples: whole vector blocks for every ISA's kernels.
constexpr int kSliceAlign = 16;

// One thread's share of a batch: samples [n0, n1) of N, processed by thread t (Model::set_threads).
struct Slice {
  int N, n0, n1, t;
  int size() const { return n1 - n0; }
  bool empty() const { return n1 <= n0; }
};

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

  // Threads (Model::set_threads). A layer that can run on slices of a batch overrides the members below;
  // the model then runs every layer of a step on T slices at once, one per thread, and calls
  // reduce_grads() on the calling thread once every slice of the layer's backward is done.
  virtual bool supports_slices() const { return false; }
  // Sets the thread count the per-thread workspaces are sized for (reserve() follows).
  void set_threads(int threads) { threads_ = threads; }
  // Single-threaded preparation before a sliced forward with table k (e.g. first-use buffers).
  virtual void prepare(const ops::KernelTable& k) {}
  // Like forward/backward, on samples [s.n0, s.n1) of the batch: in, out, dout and din point at the
  // slice's first sample (s.n0 only locates the layer's own per-sample state, e.g. pooling argmax).
  // Parameter gradients of slice t go to the layer's own slot t (t = 0: the ParameterSet's gradients).
  virtual void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s);
  virtual void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                              const float* dout, float* din, const Slice& s);
  // Adds the slots of slices 1..T-1 into the ParameterSet's gradients, in slice order.
  virtual void reduce_grads(ParameterSet& p) {}

 protected:
  int threads() const { return threads_; }
  int threads_ = 1;
  std::string name_;
  std::vector<int> param_indices_;
};

using LayerList = std::vector<std::unique_ptr<Layer>>;

}  // namespace ringtrain::nn
