#include "ringtrain/nn/model.h"

#include <algorithm>
#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::nn {

int GraphBuilder::add(std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  const int values = int(nodes_.size()) + 1;
  for (int v : inputs)
    check(v >= 0 && v < values, "graph: layer '" + layer->name() + "' reads value " + std::to_string(v) +
                                    ", which is not written before it");
  nodes_.push_back({std::move(layer), std::move(inputs)});
  last_ = int(nodes_.size());
  return last_;
}

std::unique_ptr<Model> GraphBuilder::build() { return std::make_unique<Model>(input_, std::move(nodes_)); }

Model::Model(Shape input, std::vector<Node> nodes) : input_(std::move(input)) {
  for (Node& n : nodes) {
    layers_.push_back(std::move(n.layer));
    inputs_.push_back(std::move(n.inputs));
  }
  build();
}

namespace {
// Waits for a counter the pool's threads bump: spins briefly (a layer's slices finish close together), then
// yields the core (a shared machine may have parked the thread it waits for).
void spin_until_at_least(const std::atomic<int>& counter, int target) {
  for (int spins = 0; counter.load(std::memory_order_acquire) < target; ++spins)
    if (spins > 2000) std::this_thread::yield();
}
}  // namespace

Model::Model(Shape input, LayerList layers) : input_(std::move(input)), layers_(std::move(layers)) {
  for (std::size_t i = 0; i < layers_.size(); ++i) inputs_.push_back({int(i)});
  build();
}

void Model::build() {
  check(!layers_.empty(), "model: no layers");
  shapes_.push_back(input_);
  consumers_.assign(layers_.size() + 1, 0);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    check(int(inputs_[i].size()) == layer.num_inputs(),
          "model: layer '" + layer.name() + "' takes " + std::to_string(layer.num_inputs()) + " input(s), given " +
              std::to_string(inputs_[i].size()));
    std::vector<Shape> in;
    for (int v : inputs_[i]) {
      check(v >= 0 && v <= int(i), "model: layer '" + layer.name() + "' reads a value not written before it");
      in.push_back(shapes_[std::size_t(v)]);
      ++consumers_[std::size_t(v)];
    }
    layer.set_context(&ctx_);
    shapes_.push_back(layer.num_inputs() == 1 ? layer.configure(in[0]) : layer.configure_inputs(in));
    layer.declare(*params_);
  }
  params_->allocate();
  grad_home_.resize(shapes_.size());
  for (std::size_t v = 0; v < shapes_.size(); ++v) grad_home_[v] = int(v);
  // From the last node back, so an add's output already has its final home (chains of adds share one buffer).
  // The input (value 0) keeps its own: it is what a pipeline stage sends back.
  for (std::size_t i = layers_.size() - 1; i-- > 0;)
    if (layers_[i]->passes_gradient_through())
      for (int v : inputs_[i])
        if (v > 0 && consumers_[std::size_t(v)] == 1) grad_home_[std::size_t(v)] = grad_home_[i + 1];
  done_ = std::make_unique<std::atomic<int>[]>(layers_.size());
  summed_ = std::make_unique<std::atomic<int>[]>(layers_.size());
  grad_floats_.assign(layers_.size(), 0);
  for (std::size_t i = 0; i < layers_.size(); ++i)
    for (int v : layers_[i]->param_indices()) grad_floats_[i] += params_->views()[std::size_t(v)].numel;
}

std::unique_ptr<Model> Model::cut(Model&& whole, int begin, int end) {
  const int L = int(whole.layers_.size());
  check(begin >= 0 && begin < end && end <= L, "model: stage [" + std::to_string(begin) + ", " + std::to_string(end) +
                                                   ") is not a non-empty range of the " + std::to_string(L) + " nodes");
  // Layers linked across the cut (LeNet-5's conv1 -> conv2 blocked activation) forget the partner that
  // stays behind (freed with whole).
  const auto inside = [&](const Layer* l) {
    for (int i = begin; i < end; ++i)
      if (whole.layers_[std::size_t(i)].get() == l) return true;
    return false;
  };
  for (int i = begin; i < end; ++i) whole.layers_[std::size_t(i)]->drop_links_outside(inside);
  std::vector<Node> nodes;
  for (int i = begin; i < end; ++i) {
    std::vector<int> in;
    for (int v : whole.inputs_[std::size_t(i)]) {
      check(v >= begin, "model: node " + std::to_string(i) + " ('" + whole.layers_[std::size_t(i)]->name() +
                            "') reads value " + std::to_string(v) + ", from before the stage starting at node " +
                            std::to_string(begin) + " (not a chain point)");
      in.push_back(v - begin);
    }
    nodes.push_back({std::move(whole.layers_[std::size_t(i)]), std::move(in)});
  }
  auto stage = std::make_unique<Model>(whole.shapes_[std::size_t(begin)], std::move(nodes));
  stage->set_name(whole.name());
  // The stage keeps whole's values: parameters and buffers, by name.
  ParameterSet& p = *stage->params_;
  for (std::size_t i = 0; i < p.views().size(); ++i) {
    const ParamView& v = p.views()[i];
    const ParamView& w = whole.params_->view(v.name);
    std::copy(whole.params_->params() + w.offset, whole.params_->params() + w.offset + v.numel, p.params() + v.offset);
  }
  for (const BufferView& b : p.buffer_views())
    for (const BufferView& w : whole.params_->buffer_views()) {
      if (w.name != b.name) continue;
      if (b.int64)
        std::copy(whole.params_->counters() + w.offset, whole.params_->counters() + w.offset + b.numel, p.counters() + b.offset);
      else
        std::copy(whole.params_->buffers() + w.offset, whole.params_->buffers() + w.offset + b.numel, p.buffers() + b.offset);
    }
  return stage;
}

void Model::share_parameters(Model& owner) {
  const ParameterSet& mine = *params_;
  const ParameterSet& theirs = *owner.params_;
  bool same = mine.size() == theirs.size() && mine.views().size() == theirs.views().size() &&
              mine.buffer_views().size() == theirs.buffer_views().size() &&
              mine.buffer_floats() == theirs.buffer_floats() && mine.counter_count() == theirs.counter_count();
  for (std::size_t i = 0; same && i < mine.views().size(); ++i)
    same = mine.views()[i].name == theirs.views()[i].name && mine.views()[i].offset == theirs.views()[i].offset &&
           mine.views()[i].numel == theirs.views()[i].numel;
  for (std::size_t i = 0; same && i < mine.buffer_views().size(); ++i)
    same = mine.buffer_views()[i].name == theirs.buffer_views()[i].name &&
           mine.buffer_views()[i].offset == theirs.buffer_views()[i].offset;
  check(same, "model: '" + name_ + "' cannot share the parameters of '" + owner.name_ +
                  "': they declare different parameters or buffers");
  params_ = owner.params_;
  for (auto& layer : layers_) layer->reserve_grad_slots(*params_);
}

void Model::share_value_gradients(Model& owner) {
  check(shapes_ == owner.shapes_ && consumers_ == owner.consumers_,
        "model: '" + name_ + "' cannot share the value gradients of '" + owner.name_ + "': other values");
  vgrads_ = owner.vgrads_;
  grads_shared_ = true;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->share_backward_scratch(*owner.layers_[i]);
  const int batch = max_batch_;
  max_batch_ = 0;
  if (batch > 0) reserve(batch);
}

double Model::node_cost(std::size_t node) const {
  return layers_[node]->forward_macs() + double(shape_numel(shapes_[node + 1]));
}

void Model::set_input_gradient(bool on) {
  if (on == input_grad_) return;
  input_grad_ = on;
  const int batch = max_batch_;
  max_batch_ = 0;
  if (batch > 0) reserve(batch);
}

void Model::init_parameters(uint64_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < params_->views().size(); ++i) {
    const ParamView& v = params_->views()[i];
    float* p = params_->param(int(i));
    const float a = float(v.init.a);
    switch (v.init.kind) {
      case Init::FanInUniform: {
        const float bound = 1.0f / std::sqrt(float(v.fan_in));
        for (std::size_t j = 0; j < v.numel; ++j) p[j] = rng.uniform(-bound, bound);
        break;
      }
      case Init::Uniform:
        for (std::size_t j = 0; j < v.numel; ++j) p[j] = rng.uniform(-a, a);
        break;
      case Init::Normal:
        for (std::size_t j = 0; j < v.numel; ++j) p[j] = a * rng.normal();
        break;
      case Init::TruncNormal:
        for (std::size_t j = 0; j < v.numel; ++j) {
          float x = a * rng.normal();
          while (x < -2.0f || x > 2.0f) x = a * rng.normal();
          p[j] = x;
        }
        break;
      case Init::Constant:
        std::fill(p, p + v.numel, a);
        break;
    }
  }
  params_->reset_buffers();
}

void Model::reserve(int max_batch) {
  check(max_batch > 0, "model: batch size must be positive");
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  acts_.resize(shapes_.size());
  std::vector<AlignedBuffer<float>>& grads = vgrads_->grads;
  grads.resize(shapes_.size());
  // Own buffers take the exact size; shared ones only grow (another sharer may have reserved more).
  const auto size_grad = [&](AlignedBuffer<float>& b, std::size_t n) {
    if (grads_shared_ ? b.size() < n : b.size() != n) b.resize(n);
  };
  int64_t largest = shape_numel(input_);
  for (std::size_t v = 1; v < shapes_.size(); ++v) {
    acts_[v].resize(std::size_t(max_batch) * per_sample(int(v)));
    // The last value's gradient is the caller's dlogits; unread values get none.
    if (v + 1 < shapes_.size() && consumers_[v] > 0 && grad_home_[v] == int(v))
      size_grad(grads[v], std::size_t(max_batch) * per_sample(int(v)));
    largest = std::max(largest, shape_numel(shapes_[v]));
  }
  for (auto& layer : layers_) {
    layer->reserve(max_batch);
    layer->reserve_grad_slots(*params_);
  }
  largest_ = largest;
  size_grad(grads[0], input_grad_ ? std::size_t(max_batch) * per_sample(0) : 0);
  bool fans_out = false;
  for (std::size_t v = input_grad_ ? 0 : 1; v < consumers_.size(); ++v) fans_out |= consumers_[v] > 1;
  // Two inputs of one node may both need a second buffer (x + x): two regions.
  size_grad(vgrads_->fanout, fans_out ? 2 * std::size_t(max_batch) * largest : 0);
  written_.assign(std::size_t(threads()), std::vector<uint8_t>(shapes_.size(), 0));
}

void Model::set_threads(int threads) {
  check(threads >= 1, "model: thread count must be at least 1, got " + std::to_string(threads));
  if (threads == this->threads()) return;
  if (threads > 1)
    for (auto& layer : layers_)
      check(layer->supports_slices() || layer->needs_whole_batch(),
            "model: layer '" + layer->name() + "' cannot be split across threads");
  pool_ = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto& layer : layers_) {
    layer->set_threads(threads);
    layer->set_thread_pool(pool_.get());
  }
  const int batch = max_batch_;
  max_batch_ = 0;
  if (batch > 0) reserve(batch);
}

double Model::forward_macs() const {
  double macs = 0.0;
  for (const auto& layer : layers_) macs += layer->forward_macs();
  return macs;
}

double Model::backward_macs(std::size_t node) const {
  const bool reads_input = std::find(inputs_[node].begin(), inputs_[node].end(), 0) != inputs_[node].end();
  return layers_[node]->forward_macs() * (reads_input ? 1.0 : 2.0);
}

double Model::train_flops_per_sample() const {
  double macs = 0.0;
  for (std::size_t i = 0; i < layers_.size(); ++i) macs += layers_[i]->forward_macs() + backward_macs(i);
  return 2.0 * macs;
}

std::size_t Model::activation_floats() const {
  std::size_t n = 0;
  for (const auto& a : acts_) n += a.size();
  if (grads_shared_) return n;
  n += vgrads_->fanout.size();
  for (const auto& g : vgrads_->grads) n += g.size();
  return n;
}

const float* Model::act(int v, const float* x, int n0) const {
  return (v == 0 ? x : acts_[std::size_t(v)].data()) + std::size_t(n0) * per_sample(v);
}

float* Model::grad(int v, int n0) {
  return vgrads_->grads[std::size_t(grad_home_[std::size_t(v)])].data() + std::size_t(n0) * per_sample(v);
}

const float* Model::output_grad(std::size_t i, const float* dlogits, int n0) {
  const int v = int(i) + 1;
  return std::size_t(v) + 1 == shapes_.size() ? dlogits + std::size_t(n0) * per_sample(v) : grad(v, n0);
}

void Model::forward_node(const ops::KernelTable& k, std::size_t i, const float* x, const Slice& s, bool sliced) {
  Layer& layer = *layers_[i];
  float* out = acts_[i + 1].data() + std::size_t(s.n0) * per_sample(int(i) + 1);
  const std::vector<int>& in = inputs_[i];
  if (layer.num_inputs() == 1) {
    const float* a = act(in[0], x, s.n0);
    if (sliced)
      layer.forward_slice(k, *params_, a, out, s);
    else
      layer.forward(k, *params_, a, out, s.N);
    return;
  }
  const float* ins[8];
  for (std::size_t j = 0; j < in.size(); ++j) ins[j] = act(in[j], x, s.n0);
  layer.forward_inputs(k, *params_, ins, out, s);
}

void Model::backward_node(const ops::KernelTable& k, std::size_t i, const float* x, const float* dlogits,
                          const Slice& s, bool sliced) {
  Layer& layer = *layers_[i];
  const int out_v = int(i) + 1;
  const float* out = act(out_v, x, s.n0);
  const float* dout = output_grad(i, dlogits, s.n0);
  // Each input's gradient goes straight into its value's buffer the first time backward reaches the
  // value; a value read again (fan-out) is written into a second buffer and added (in node order, so the
  // sum's order is fixed), or added by the layer itself where it can (Slice::accumulate_din: vit's layer
  // norms, the second readers of the residual streams; the same adds, without the buffer's pass).
  std::vector<uint8_t>& written = written_[std::size_t(s.t)];
  const std::vector<int>& in = inputs_[i];
  float* dins[8];
  bool added[8];
  Slice call = s;
  for (std::size_t j = 0; j < in.size(); ++j) {
    const int v = in[j];
    added[j] = false;
    if (v == 0 && !input_grad_) {
      dins[j] = nullptr;
    } else if (!written[std::size_t(v)]) {
      dins[j] = grad(v, s.n0);
      written[std::size_t(v)] = 1;
    } else if (layer.num_inputs() == 1 && layer.accumulates_input_grad()) {
      dins[j] = grad(v, s.n0);
      call.accumulate_din = true;
    } else {
      dins[j] = vgrads_->fanout.data() + (j * std::size_t(max_batch_) + s.n0) * largest_;
      added[j] = true;
    }
  }
  if (layer.num_inputs() == 1) {
    const float* a = act(in[0], x, s.n0);
    if (sliced || call.accumulate_din)
      layer.backward_slice(k, *params_, a, out, dout, dins[0], call);
    else
      layer.backward(k, *params_, a, out, dout, dins[0], s.N);
  } else {
    const float* ins[8];
    for (std::size_t j = 0; j < in.size(); ++j) ins[j] = act(in[j], x, s.n0);
    layer.backward_inputs(k, *params_, ins, out, dout, dins, s);
  }
  for (std::size_t j = 0; j < in.size(); ++j) {
    if (!added[j]) continue;
    // (The kernels' add, the same float adds: this file's own loop, built for the baseline ISA, made vit's
    // layer norms' backward, the second reader of each residual stream, 3x their kernel's time.)
    float* g = grad(in[j], s.n0);
    k.add_forward(g, g, dins[j], int64_t(s.size()) * per_sample(in[j]));
  }
}

const float* Model::forward(const ops::KernelTable& k, const float* x, int N, const NodeHook& after_node) {
  // (no check(): its message would be built, i.e. allocated, on every step)
  if (N <= 0 || N > max_batch_)
    throw Error("model: batch of " + std::to_string(N) + " exceeds the reserved " + std::to_string(max_batch_));
  const Slice whole{N, 0, N, 0};
  if (!pool_) {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      forward_node(k, i, x, whole, false);
      if (after_node) after_node();
    }
    return acts_.back().data();
  }
  for (auto& layer : layers_) layer->prepare(k);
  const int T = pool_->size();
  // Runs of sliceable layers on T threads, the layers that need the whole batch between them.
  for (std::size_t a = 0; a < layers_.size();) {
    if (layers_[a]->needs_whole_batch()) {
      forward_node(k, a++, x, whole, false);
      if (after_node) after_node();
      continue;
    }
    std::size_t b = a;
    while (b < layers_.size() && !layers_[b]->needs_whole_batch()) ++b;
    // A last layer that splits by output channels (Layer::splits_by_outputs) runs once the rest of the run is
    // done, every thread on its channels of the whole batch.
    const bool by_outputs = layers_[b - 1]->splits_by_outputs(N, T);
    const std::size_t sliced_end = by_outputs ? b - 1 : b;
    if (a < sliced_end)
      pool_->run([&](int t) {
        auto [n0, n1] = slice_of(N, T, t, kSliceAlign);
        const Slice s{N, n0, n1, t};
        for (std::size_t i = a; i < sliced_end; ++i) {
          forward_node(k, i, x, s, true);
          if (t == 0 && after_node) after_node();
        }
      });
    if (by_outputs) {
      const std::size_t i = b - 1;
      pool_->run([&](int t) {
        layers_[i]->forward_part(k, *params_, act(inputs_[i][0], x, 0), acts_[i + 1].data(), N, t, T);
      });
      if (after_node) after_node();
    }
    a = b;
  }
  return acts_.back().data();
}

void Model::backward(const ops::KernelTable& k, const float* x, const float* dlogits, int N,
                     const GradReadyHook& on_grads_ready) {
  for (auto& w : written_) std::fill(w.begin(), w.end(), uint8_t(0));
  const Slice whole{N, 0, N, 0};
  if (!pool_) {
    for (std::size_t i = layers_.size(); i-- > 0;) {
      backward_node(k, i, x, dlogits, whole, false);
      if (on_grads_ready) on_grads_ready(*layers_[i]);
    }
    return;
  }
  const int T = pool_->size();
  // Sliced runs [a, b) backwards, whole-batch layers on the calling thread between them; in the written_
  // flags the calling thread's (t = 0) stand for the whole batch.
  for (std::size_t b = layers_.size(); b > 0;) {
    if (layers_[b - 1]->needs_whole_batch()) {
      --b;
      // Threads 1..T-1 may have written parts of the inputs' gradients: a whole-batch layer sees the
      // union, so every slice's flags must agree (they do: slices run the same nodes).
      backward_node(k, b, x, dlogits, whole, false);
      for (int t = 1; t < T; ++t)
        for (int v : inputs_[b]) written_[std::size_t(t)][std::size_t(v)] = written_[0][std::size_t(v)];
      if (on_grads_ready) on_grads_ready(*layers_[b]);
      continue;
    }
    std::size_t a = b;
    while (a > 0 && !layers_[a - 1]->needs_whole_batch()) --a;
    for (std::size_t i = a; i < b; ++i) {
      done_[i].store(0, std::memory_order_relaxed);
      summed_[i].store(0, std::memory_order_relaxed);
    }
    pool_->run([&](int t) {
      auto [n0, n1] = slice_of(N, T, t, kSliceAlign);
      const Slice s{N, n0, n1, t};
      for (std::size_t i = b; i-- > a;) {
        // The run's first layer has its output gradient complete for every sample (the layers above it ran
        // before this run): it may split its weight gradient by output channels instead of by samples.
        const bool by_outputs = i + 1 == b && layers_[i]->splits_by_outputs(N, T);
        if (by_outputs) {
          // Every thread: its output channels' weight gradient and share of the input gradient over the whole
          // batch; once all parts are in, its slice's input gradient, their sum.
          const bool input_grad = inputs_[i][0] != 0 || input_grad_;
          layers_[i]->backward_part(k, *params_, act(inputs_[i][0], x, 0), output_grad(i, dlogits, 0), N, t, T,
                                    input_grad);
          done_[i].fetch_add(1, std::memory_order_acq_rel);
          spin_until_at_least(done_[i], T);
          Slice data = s;
          data.data_only = true;
          backward_node(k, i, x, dlogits, data, true);
          if (t == 0 && on_grads_ready) on_grads_ready(*layers_[i]);
          continue;
        }
        backward_node(k, i, x, dlogits, s, true);
        if (layers_[i]->param_indices().empty()) {
          if (t == 0 && on_grads_ready) on_grads_ready(*layers_[i]);
          continue;
        }
        if (grad_floats_[i] >= kSplitReduceFloats) {
          // A large gradient (resnet18's late convs: up to 2.4 M floats a slot): every thread sums its part
          // once all slices are in, rather than the calling thread alone while the others run ahead.
          done_[i].fetch_add(1, std::memory_order_acq_rel);
          spin_until_at_least(done_[i], T);
          layers_[i]->reduce_grads(*params_, t, T);
          summed_[i].fetch_add(1, std::memory_order_acq_rel);
          if (t > 0) continue;
          spin_until_at_least(summed_[i], T);
          if (on_grads_ready) on_grads_ready(*layers_[i]);
          continue;
        }
        if (t > 0) {
          done_[i].fetch_add(1, std::memory_order_release);  // workers never wait: on to the next layer
          continue;
        }
        // The caller's thread: once every slice has this layer's gradients, sum them and call the hook,
        // while the other threads go on with the layers below.
        spin_until_at_least(done_[i], T - 1);
        layers_[i]->reduce_grads(*params_);
        if (on_grads_ready) on_grads_ready(*layers_[i]);
      }
    });
    b = a;
  }
}

}  // namespace ringtrain::nn
