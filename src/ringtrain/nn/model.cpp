#include "ringtrain/nn/model.h"

#include <algorithm>
#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::nn {

Model::Model(Shape input, LayerList layers) : input_(std::move(input)), layers_(std::move(layers)) {
  check(!layers_.empty(), "model: no layers");
  Shape shape = input_;
  for (auto& layer : layers_) {
    layer->declare(params_);
    shape = layer->configure(shape);
    shapes_.push_back(shape);
  }
  params_.allocate();
  done_ = std::make_unique<std::atomic<int>[]>(layers_.size());
}

void Model::init_parameters(uint64_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < params_.views().size(); ++i) {
    const ParamView& v = params_.views()[i];
    float bound = 1.0f / std::sqrt(float(v.fan_in));
    float* p = params_.param(int(i));
    for (std::size_t j = 0; j < v.numel; ++j) p[j] = rng.uniform(-bound, bound);
  }
}

void Model::reserve(int max_batch) {
  check(max_batch > 0, "model: batch size must be positive");
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  acts_.resize(layers_.size());
  int64_t largest = shape_numel(input_);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    acts_[i].resize(std::size_t(max_batch) * shape_numel(shapes_[i]));
    largest = std::max(largest, shape_numel(shapes_[i]));
    layers_[i]->reserve(max_batch);
  }
  largest_ = largest;
  grad_a_.resize(std::size_t(max_batch) * largest);
  grad_b_.resize(std::size_t(max_batch) * largest);
}

void Model::set_threads(int threads) {
  check(threads >= 1, "model: thread count must be at least 1, got " + std::to_string(threads));
  if (threads == this->threads()) return;
  if (threads > 1)
    for (auto& layer : layers_)
      check(layer->supports_slices(), "model: layer '" + layer->name() + "' cannot be split across threads");
  pool_ = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto& layer : layers_) layer->set_threads(threads);
  const int batch = max_batch_;
  max_batch_ = 0;
  if (batch > 0) reserve(batch);
}

const float* Model::forward(const ops::KernelTable& k, const float* x, int N) {
  // (no check(): its message would be built, i.e. allocated, on every step)
  if (N <= 0 || N > max_batch_)
    throw Error("model: batch of " + std::to_string(N) + " exceeds the reserved " + std::to_string(max_batch_));
  if (!pool_) {
    const float* in = x;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->forward(k, params_, in, acts_[i].data(), N);
      in = acts_[i].data();
    }
    return in;
  }
  for (auto& layer : layers_) layer->prepare(k);
  const int T = pool_->size();
  pool_->run([&](int t) {
    auto [n0, n1] = slice_of(N, T, t, kSliceAlign);
    const Slice s{N, n0, n1, t};
    const float* in = x + std::size_t(n0) * shape_numel(input_);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      float* out = acts_[i].data() + std::size_t(n0) * shape_numel(shapes_[i]);
      layers_[i]->forward_slice(k, params_, in, out, s);
      in = out;
    }
  });
  return acts_.back().data();
}

void Model::backward(const ops::KernelTable& k, const float* x, const float* dlogits, int N,
                     const GradReadyHook& on_grads_ready) {
  float* spare[2] = {grad_a_.data(), grad_b_.data()};
  if (!pool_) {
    const float* dout = dlogits;
    for (std::size_t i = layers_.size(); i-- > 0;) {
      const float* in = i == 0 ? x : acts_[i - 1].data();
      float* din = i == 0 ? nullptr : spare[i % 2];
      layers_[i]->backward(k, params_, in, acts_[i].data(), dout, din, N);
      if (on_grads_ready) on_grads_ready(*layers_[i]);
      dout = din;
    }
    return;
  }
  const int T = pool_->size();
  for (std::size_t i = 0; i < layers_.size(); ++i) done_[i].store(0, std::memory_order_relaxed);
  pool_->run([&](int t) {
    auto [n0, n1] = slice_of(N, T, t, kSliceAlign);
    const Slice s{N, n0, n1, t};
    // Slice-local pointers; in the two gradient buffers each slice owns samples [n0, n1) at the
    // largest per-sample size, so slices at different layers never overlap.
    const float* dout = dlogits + std::size_t(n0) * num_classes();
    float* mine[2] = {spare[0] + std::size_t(n0) * largest_, spare[1] + std::size_t(n0) * largest_};
    for (std::size_t i = layers_.size(); i-- > 0;) {
      const float* in = i == 0 ? x + std::size_t(n0) * shape_numel(input_)
                               : acts_[i - 1].data() + std::size_t(n0) * shape_numel(shapes_[i - 1]);
      const float* out = acts_[i].data() + std::size_t(n0) * shape_numel(shapes_[i]);
      float* din = i == 0 ? nullptr : mine[i % 2];
      layers_[i]->backward_slice(k, params_, in, out, dout, din, s);
      dout = din;
      if (layers_[i]->param_indices().empty()) {
        if (t == 0 && on_grads_ready) on_grads_ready(*layers_[i]);
        continue;
      }
      if (t > 0) {
        done_[i].fetch_add(1, std::memory_order_release);  // workers never wait: on to the next layer
        continue;
      }
      // The caller's thread: once every slice has this layer's gradients, sum them and call the hook,
      // while the other threads go on with the layers below.
      for (int spins = 0; done_[i].load(std::memory_order_acquire) < T - 1; ++spins)
        if (spins > 2000) std::this_thread::yield();
      layers_[i]->reduce_grads(params_);
      if (on_grads_ready) on_grads_ready(*layers_[i]);
    }
  });
}

}  // namespace ringtrain::nn
