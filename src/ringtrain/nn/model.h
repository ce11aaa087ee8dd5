// Model: a sequence of layers with its ParameterSet and its activation buffers.
// Activations are sized once by reserve(max_batch); forward and backward then allocate nothing.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

class Model {
 public:
  // input: per-sample input shape, e.g. [1,28,28].
  Model(Shape input, LayerList layers);

  // PyTorch's default initialisation: every weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  // (kaiming_uniform with a = sqrt(5) reduces to this bound), drawn in state_dict order from seed.
  void init_parameters(uint64_t seed);
  // Sizes activation buffers for batches of up to max_batch samples (no-op if already large enough).
  void reserve(int max_batch);
  // Splits every step across `threads` threads of one pool owned by the model (the caller is thread 0,
  // so threads - 1 workers start; 1, the default, runs everything on the caller). Each thread runs the
  // whole forward, then the whole backward, on its slice of the batch (whole blocks of 16 samples), so
  // threads meet only twice a step; each layer's parameter gradients are summed over the slices in slice
  // order (the same result every run for a given T) on the calling thread, which then calls the hook.
  // May be called between steps; re-sizes the per-thread workspaces for the reserved batch. Throws if a
  // layer cannot run on slices.
  void set_threads(int threads);
  int threads() const { return pool_ ? pool_->size() : 1; }
  // The model's pool (null with one thread), for the caller's own per-step work, e.g. slicing the
  // optimizer update with parallel_run(model.thread_pool(), ...).
  ThreadPool* thread_pool() { return pool_.get(); }

  // Runs the layers on x [N, input...]; returns the logits [N, num_classes()].
  const float* forward(const ops::KernelTable& k, const float* x, int N);
  // Called after each layer's backward, last layer first, once the layer's parameter gradients (if it has
  // any) are written; for layers without parameters it is just a point between layers (the GradReducer
  // moves its all-reduces on there).
  using GradReadyHook = std::function<void(const Layer& layer)>;
  // Backpropagates dlogits through the layers of the last forward (same x, same N).
  void backward(const ops::KernelTable& k, const float* x, const float* dlogits, int N,
                const GradReadyHook& on_grads_ready = {});

  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }
  const LayerList& layers() const { return layers_; }
  const Shape& input_shape() const { return input_; }
  int num_classes() const { return int(shape_numel(shapes_.back())); }
  int max_batch() const { return max_batch_; }

 private:
  Shape input_;
  LayerList layers_;
  std::vector<Shape> shapes_;                 // shapes_[i]: per-sample output of layer i
  ParameterSet params_;
  std::vector<AlignedBuffer<float>> acts_;    // acts_[i]: output of layer i
  AlignedBuffer<float> grad_a_, grad_b_;      // ping-pong buffers for activation gradients
  int max_batch_ = 0;
  int64_t largest_ = 0;                       // largest per-sample activation, in floats
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<std::atomic<int>[]> done_;  // per layer: slices 1..T-1 whose backward finished
};

}  // namespace ringtrain::nn
