// Model: a graph of layers (nodes in topological order, each reading one or more values) with its
// ParameterSet and its activation buffers. Value 0 is the model input; value i + 1 is node i's output;
// the last node's output is the logits. Every value owns an activation buffer and a gradient buffer,
// sized once by reserve(max_batch); forward and backward then allocate nothing. Backward runs the nodes
// in reverse; a value read by several nodes (a residual branch) gets the sum of their gradients.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::nn {

// One node of a graph: a layer and the values it reads.
struct Node {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;
};

// Builds a graph node by node: each add() returns the value its layer writes.
class GraphBuilder {
 public:
  explicit GraphBuilder(Shape input) : input_(std::move(input)) {}
  static constexpr int kInput = 0;  // the model input's value
  // Appends a node reading `inputs`; returns its output value.
  int add(std::unique_ptr<Layer> layer, std::vector<int> inputs);
  // Appends a node reading the last value written (the input before any node).
  int add(std::unique_ptr<Layer> layer) { return add(std::move(layer), std::vector<int>{last_}); }
  int last() const { return last_; }
  // The model; its output is the last node's value.
  std::unique_ptr<class Model> build();

 private:
  Shape input_;
  std::vector<Node> nodes_;
  int last_ = kInput;
};

class Model {
 public:
  // input: per-sample input shape, e.g. [1,28,28]. Nodes must read only earlier values.
  Model(Shape input, std::vector<Node> nodes);
  // A chain: every layer reads the previous one's output.
  Model(Shape input, LayerList layers);

  // Nodes [begin, end) of `whole` as a model of their own: a pipeline stage (nn/pipeline_stages.h). Its input
  // is value `begin` of whole (node begin-1's output, or whole's input when begin = 0), which must be the
  // only value that nodes from `begin` on read from before it (a chain point); its nodes read their values
  // renumbered. The layers move out of `whole` (left unusable) and are configured and declare their
  // parameters again here, so the stage holds only its own (same names, whole's values); the name stays whole's.
  static std::unique_ptr<Model> cut(Model&& whole, int begin, int end);

  // Every parameter initialised as its layer declared (ParamView::init: PyTorch's initialisation for the
  // module), drawn tensor by tensor in state_dict order from seed; buffers reset to their initial values.
  void init_parameters(uint64_t seed);
  // Sizes activation buffers for batches of up to max_batch samples (no-op if already large enough).
  void reserve(int max_batch);
  // Splits every step across `threads` threads of one pool owned by the model (the caller is thread 0,
  // so threads - 1 workers start; 1, the default, runs everything on the caller). Each thread runs the
  // layers on its slice of the batch (whole blocks of 16 samples), so threads meet only at the ends of a
  // pass and at layers that need the whole batch (Layer::needs_whole_batch: batch norm in training), which
  // the calling thread runs alone. Each layer's parameter gradients are summed over the slices in slice
  // order (the same result every run for a given T) on the calling thread, which then calls the hook.
  // May be called between steps; re-sizes the per-thread workspaces for the reserved batch. Throws if a
  // layer cannot run on slices.
  void set_threads(int threads);
  int threads() const { return pool_ ? pool_->size() : 1; }
  // The model's pool (null with one thread), for the caller's own per-step work, e.g. slicing the
  // optimizer update with parallel_run(model.thread_pool(), ...).
  ThreadPool* thread_pool() { return pool_.get(); }

  // Train or eval mode (batch norm's statistics, dropout); training by default.
  void set_training(bool training) { ctx_.training = training; }
  bool training() const { return ctx_.training; }
  // What the next forward's dropout masks depend on (StepContext): the run's seed, the step, the batch's
  // dataset indices (N of them, valid until the backward; null: positions in the batch).
  void set_step(uint64_t seed, int64_t step, const int64_t* sample_ids) {
    ctx_.seed = seed;
    ctx_.step = step;
    ctx_.sample_ids = sample_ids;
  }

  // Runs the layers on x [N, input...]; returns the logits [N, num_classes()]. after_node, if given, is
  // called on the calling thread after each node (its slice of it under threads): a point between layers,
  // where a pipeline stage moves its messages on (MPI progresses them only inside its calls).
  using NodeHook = std::function<void()>;
  const float* forward(const ops::KernelTable& k, const float* x, int N, const NodeHook& after_node = {});
  // Called after each layer's backward, last layer first, once the layer's parameter gradients (if it has
  // any) are written; for layers without parameters it is just a point between layers (the GradReducer
  // moves its all-reduces on there).
  using GradReadyHook = std::function<void(const Layer& layer)>;
  // Backpropagates dlogits through the layers of the last forward (same x, same N).
  void backward(const ops::KernelTable& k, const float* x, const float* dlogits, int N,
                const GradReadyHook& on_grads_ready = {});
  // Also compute the gradient of the model input in backward (off by default: the data needs none; a
  // pipeline stage after the first sends it to the stage before). input_grad(): [N, input...] of the
  // last backward. Re-sizes the reserved buffers.
  void set_input_gradient(bool on);
  bool input_gradient() const { return input_grad_; }
  const float* input_grad() const { return vgrads_->grads.empty() ? nullptr : vgrads_->grads[0].data(); }
  // What node i costs a sample: its forward multiply-adds plus the floats it writes (so layers without
  // multiply-adds - ReLU, add, pooling - are not free); what pipeline stages are balanced by.
  double node_cost(std::size_t node) const;

  // The zoo name the model was built as (nn/models/zoo.h: "lenet5", "resnet18", ...; checkpoints record it).
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  ParameterSet& params() { return *params_; }
  const ParameterSet& params() const { return *params_; }
  // From now on this model runs on owner's parameters, gradients and buffers (its own are dropped): a
  // second copy of the same layers with activations of its own, e.g. a pipeline stage holding several
  // micro-batches between their forward and backward (train/pipeline_engine.h). Throws unless both
  // declare the same parameters and buffers in the same places.
  void share_parameters(Model& owner);
  // From now on this model writes its values' gradients (and the second buffer of values read twice) into
  // owner's: only the activations must be kept per micro-batch in flight, a value's gradient lives only
  // during one backward, and a pipeline stage runs one backward at a time. Copies sharing them then touch
  // one set of gradient buffers, not one each (half a stage's memory in flight, and the buffers a backward
  // writes stay in cache from the last one). Same architecture required (throws otherwise); the buffers
  // grow to the largest batch any sharer reserves.
  void share_value_gradients(Model& owner);
  const LayerList& layers() const { return layers_; }
  // The values node i reads.
  const std::vector<int>& inputs_of(std::size_t node) const { return inputs_[node]; }
  const Shape& input_shape() const { return input_; }
  // Per-sample shape of a value (0: the input).
  const Shape& value_shape(int value) const { return shapes_[std::size_t(value)]; }
  int num_classes() const { return int(shape_numel(shapes_.back())); }
  int max_batch() const { return max_batch_; }
  // One sample's forward multiply-adds, summed over the layers (Layer::forward_macs).
  double forward_macs() const;
  // Multiply-adds of node i's backward for one sample: backward-weight and backward-data, each as many as
  // the forward, the second but for a node reading the model input (no input gradient is computed).
  double backward_macs(std::size_t node) const;
  // FLOPs of one sample's training step: 2 x (the forward's MACs + every node's backward_macs).
  double train_flops_per_sample() const;
  // Floats of activations and activation gradients the reserved batch holds (gradients shared with an
  // owner, share_value_gradients, are counted by the owner alone).
  std::size_t activation_floats() const;

 private:
  void build();
  // Runs node i's forward / backward on one slice (or the whole batch) of the values.
  void forward_node(const ops::KernelTable& k, std::size_t i, const float* x, const Slice& s, bool sliced);
  void backward_node(const ops::KernelTable& k, std::size_t i, const float* x, const float* dlogits, const Slice& s,
                     bool sliced);
  // Pointers to sample s.n0 of value v's activation / gradient.
  const float* act(int v, const float* x, int n0) const;
  float* grad(int v, int n0);
  // Sample n0 of node i's output gradient: the caller's dlogits for the last node, else the value's buffer.
  const float* output_grad(std::size_t i, const float* dlogits, int n0);
  std::size_t per_sample(int v) const { return std::size_t(shape_numel(shapes_[std::size_t(v)])); }

  std::string name_;
  Shape input_;
  LayerList layers_;
  std::vector<std::vector<int>> inputs_;      // inputs_[i]: the values node i reads
  std::vector<Shape> shapes_;                 // shapes_[v]: per-sample shape of value v
  std::vector<int> consumers_;                // consumers_[v]: how many node inputs read value v
  // grad_home_[v]: the value whose gradient buffer holds v's gradient: v itself, or, for a value read only by
  // a residual add (Layer::passes_gradient_through) that is not the last node, the add's output's home -
  // the gradient is that one, complete before the add's backward and written by no node after it.
  std::vector<int> grad_home_;
  std::shared_ptr<ParameterSet> params_ = std::make_shared<ParameterSet>();  // shared: share_parameters()
  StepContext ctx_;
  std::vector<AlignedBuffer<float>> acts_;    // acts_[v]: value v's activations (v >= 1)
  // The values' gradients: grads[v] (v >= 1 that someone reads; 0: the input's, set_input_gradient) and a
  // second buffer for values read more than once. Shared between copies: share_value_gradients().
  struct ValueGradients {
    std::vector<AlignedBuffer<float>> grads;
    AlignedBuffer<float> fanout;
  };
  std::shared_ptr<ValueGradients> vgrads_ = std::make_shared<ValueGradients>();
  bool grads_shared_ = false;                 // share_value_gradients: vgrads_ is another model's
  std::vector<std::vector<uint8_t>> written_; // written_[t][v]: slice t has written value v's gradient
  bool input_grad_ = false;                   // set_input_gradient: vgrads_->grads[0] holds the input's gradient
  int max_batch_ = 0;
  int64_t largest_ = 0;                       // largest per-sample value, in floats
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<std::atomic<int>[]> done_;  // per node: slices 1..T-1 whose backward finished (all T: split sum)
  std::unique_ptr<std::atomic<int>[]> summed_;  // per node, split sum: threads whose part of the sum is done
  // A layer whose parameter gradients hold at least this many floats has its slices' sum split over the
  // threads (Layer::reduce_grads parts); smaller ones are summed by the calling thread while the others go on.
  static constexpr std::size_t kSplitReduceFloats = std::size_t(1) << 18;
  std::vector<std::size_t> grad_floats_;  // per node: its parameter gradients' floats
};

}  // namespace ringtrain::nn
