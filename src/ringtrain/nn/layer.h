// Layer: the unit a Model's graph is built from (a node). A layer learns its per-sample input shape(s)
// once (configure), then declares its parameters and buffers in the model's ParameterSet (declare), then
// runs forward and backward through a KernelTable on batches of N samples. Activations and their
// gradients are owned by the Model (one buffer pair per value of the graph).
//
// Most layers read one value (forward/backward below); a layer with several inputs (Add) overrides
// num_inputs() and the *_inputs members instead. Layers write their outputs (never accumulate): the
// Model sums the gradient of a value that several layers read.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/tensor.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/nn/layer_description.h"
#include "ringtrain/nn/parameters.h"
#include "ringtrain/nn/partials.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::nn {

// Slices of a batch start on multiples of 16 samples: whole vector blocks for every ISA's kernels.
constexpr int kSliceAlign = 16;

// One thread's share of a batch: samples [n0, n1) of N, processed by thread t (Model::set_threads).
struct Slice {
  int N, n0, n1, t;
  // backward_slice only adds up the slice's input gradient from the parts backward_part left (the model's
  // split by output channels, Layer::splits_by_outputs).
  bool data_only = false;
  // backward_slice adds its input gradient to din's values instead of writing it (only asked of a layer
  // whose accumulates_input_grad() is true: a value's second reader, Model::backward_node).
  bool accumulate_din = false;
  int size() const { return n1 - n0; }
  bool empty() const { return n1 <= n0; }
};

// What a forward pass depends on beyond its tensors (Model::set_step): train or eval mode, and what a
// dropout mask is a pure function of - the run's seed, the step, and each sample's dataset index - so a
// resumed run draws the same masks, whatever the world size.
struct StepContext {
  bool training = true;
  uint64_t seed = 0;
  int64_t step = 0;
  const int64_t* sample_ids = nullptr;  // N dataset indices of the batch (null: positions 0..N-1)
  int64_t sample_id(int n) const { return sample_ids ? sample_ids[n] : n; }
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }

  // ---- building (once, in this order) ----
  // Given the per-sample input shape, returns the per-sample output shape (single-input layers).
  virtual Shape configure(const Shape& in) = 0;
  // Layers with several inputs: the inputs' per-sample shapes. The default takes exactly one.
  virtual int num_inputs() const { return 1; }
  virtual Shape configure_inputs(const std::vector<Shape>& in);
  // Registers this layer's parameters (PyTorch names "<layer>.weight", "<layer>.bias", each with its
  // Init) and buffers, after configure.
  virtual void declare(ParameterSet& params) {}
  // Sizes per-batch workspaces (e.g. pooling's argmax) for batches up to max_batch.
  virtual void reserve(int max_batch) {}
  // Multiply-adds (or comparable operations) of one sample's forward pass: the FLOP counts of the
  // benchmarks are 2x this (forward) and 6x (a training step) summed over the layers.
  virtual double forward_macs() const { return 0.0; }
  // What the layer computes in eval mode, for translators (the ONNX exporter); Unsupported by default.
  virtual LayerDescription describe() const { return {}; }

  // ---- running ----
  // Where the Model keeps the mode and step (set_step): valid from configure on.
  void set_context(const StepContext* ctx) { ctx_ = ctx; }
  bool training() const { return !ctx_ || ctx_->training; }
  // The whole batch. The defaults run forward_slice / backward_slice on one slice of all N samples, so a
  // layer that runs on slices overrides those alone; a layer that cannot overrides these.
  virtual void forward(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N) {
    forward_slice(k, p, in, out, {N, 0, N, 0});
  }
  // Writes parameter gradients into p.grads() and, when din is not null, the input gradient.
  virtual void backward(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                        const float* dout, float* din, int N) {
    backward_slice(k, p, in, out, dout, din, {N, 0, N, 0});
  }
  // Several inputs (num_inputs() > 1): in[i] per input, din[i] per input (an entry may be null: no
  // gradient wanted). s is the whole batch ({N, 0, N, 0}) unless the layer supports slices.
  virtual void forward_inputs(const ops::KernelTable& k, ParameterSet& p, const float* const* in, float* out,
                              const Slice& s);
  virtual void backward_inputs(const ops::KernelTable& k, ParameterSet& p, const float* const* in, const float* out,
                               const float* dout, float* const* din, const Slice& s);
  // Indices into the ParameterSet of the parameters this layer owns.
  const std::vector<int>& param_indices() const { return param_indices_; }
  // Model::cut: a layer linked to others (Conv2dReluPool::chain_to) forgets those that do not move into
  // the stage with it (inside(l) is false): they are freed with the rest of the whole model.
  virtual void drop_links_outside(const std::function<bool(const Layer*)>& inside) {}
  // Model::share_value_gradients: from now on this layer's backward-only workspaces (written and read within
  // one backward, e.g. the attention's gradient of q, k, v) are owner's, the same layer in another copy of
  // the model. A pipeline stage runs one backward at a time, so its copies need one set, not one each.
  // owner is this layer's twin (the copies are one architecture, checked by the model). Default: nothing.
  virtual void share_backward_scratch(Layer& owner) {}

  // ---- threads (Model::set_threads) ----
  // A layer that can run on slices of a batch overrides the members below; the model then runs every
  // such layer of a step on T slices at once, one per thread, and calls reduce_grads() on the calling
  // thread once every slice of the layer's backward is done.
  virtual bool supports_slices() const { return false; }
  // Whether backward_slice honours Slice::accumulate_din (the same bits as writing elsewhere and adding).
  virtual bool accumulates_input_grad() const { return false; }
  // Whether every input's gradient is the output's gradient itself (the residual add): the model then keeps
  // an input read by this layer alone in the output gradient's buffer, and the layer copies nothing where
  // din is dout.
  virtual bool passes_gradient_through() const { return false; }
  // A layer that must see the whole batch at once in this mode (batch norm in training: the statistics
  // are over the batch) is a meeting point: the threads finish the layers before it, the calling thread
  // runs it on the whole batch (forward/backward), then the threads go on.
  virtual bool needs_whole_batch() const { return false; }
  // Sets the thread count the per-thread workspaces are sized for (reserve() follows).
  void set_threads(int threads) { threads_ = threads; }
  // The model's thread pool (null with one thread), for a whole-batch layer that can split its own work
  // another way while the sliced layers wait (batch norm: by channels). Model::set_threads calls it.
  virtual void set_thread_pool(ThreadPool*) {}
  // Single-threaded preparation before a sliced forward with table k (e.g. first-use buffers).
  virtual void prepare(const ops::KernelTable& k) {}
  // Like forward/backward, on samples [s.n0, s.n1) of the batch: in, out, dout and din point at the
  // slice's first sample (s.n0 only locates the layer's own per-sample state, e.g. pooling argmax).
  // Parameter gradients of slice t go to slot t (grad_slot(); t = 0: the ParameterSet's gradients).
  virtual void forward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, const Slice& s);
  virtual void backward_slice(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* out,
                              const float* dout, float* din, const Slice& s);
  // A layer with large weights on small maps (resnet18's late convs) may run split by output channels over the
  // whole batch rather than by sample slices: each thread packs and reads only its part of the weight, and
  // the weight gradient needs no per-thread partials to write and add (the same bits as one thread). The
  // model asks only for the last layer of a sliced run (a whole-batch layer or the loss follows it, so in
  // backward its output gradient is complete for every sample when it starts); where the answer is yes, it
  // runs the layer's forward alone after the rest of the run (forward_part on every thread, the input being
  // complete by then); in backward every thread calls backward_part, waits for the others, then calls
  // backward_slice with Slice::data_only on its slice (the parts' input gradients added up).
  virtual bool splits_by_outputs(int N, int T) const { return false; }
  // Part `part` of `parts` of the forward over all N samples (in and out: the whole batch's).
  virtual void forward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, float* out, int N, int part,
                            int parts) {}
  // Part `part` of `parts` of the backward over all N samples (in and dout: the whole batch's): the weight
  // gradients of its output channels, straight into the ParameterSet's, and, with input_grad, what those
  // channels add to the input gradient, into the layer's own buffer (each part reads only its share of the
  // weight: resnet18's layer4 reads 9.4 MB once a step, not once a thread).
  virtual void backward_part(const ops::KernelTable& k, ParameterSet& p, const float* in, const float* dout, int N,
                             int part, int parts, bool input_grad) {}
  // Adds the slots of slices 1..T-1 into the ParameterSet's gradients, in slice order: part `part` of
  // `parts` of the elements (the model splits a large layer's sum over its threads; same bits). The
  // default sums the slots grad_slot() handed out; layers with their own partial buffers override it.
  virtual void reduce_grads(ParameterSet& p, int part = 0, int parts = 1);
  // Sizes the default per-slice gradient slots for the layer's parameters (Model::set_threads / reserve).
  void reserve_grad_slots(const ParameterSet& p);

 protected:
  int threads() const { return threads_; }
  const StepContext& context() const {
    static const StepContext none;
    return ctx_ ? *ctx_ : none;
  }
  // Where slice s writes the gradient of this layer's i-th parameter (param_indices()[i]); a slice
  // must write (not accumulate) every element, including an empty slice (zeros).
  float* grad_slot(ParameterSet& p, int i, const Slice& s) {
    return slots_.slot(s.t, i, p.grad(param_indices_[std::size_t(i)]));
  }
  int threads_ = 1;
  std::string name_;
  std::vector<int> param_indices_;
  const StepContext* ctx_ = nullptr;

 private:
  GradPartials slots_;
};

using LayerList = std::vector<std::unique_ptr<Layer>>;

}  // namespace ringtrain::nn
