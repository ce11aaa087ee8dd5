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
  grad_a_.resize(std::size_t(max_batch) * largest);
  grad_b_.resize(std::size_t(max_batch) * largest);
}

void Model::set_threads(int threads) {
  check(threads >= 1, "model: thread count must be at least 1, got " + std::to_string(threads));
  if (threads == this->threads()) return;
  pool_ = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto& layer : layers_) layer->set_thread_pool(pool_.get());
  const int batch = max_batch_;
  max_batch_ = 0;
  if (batch > 0) reserve(batch);
}

const float* Model::forward(const ops::KernelTable& k, const float* x, int N) {
  // (no check(): its message would be built, i.e. allocated, on every step)
  if (N <= 0 || N > max_batch_)
    throw Error("model: batch of " + std::to_string(N) + " exceeds the reserved " + std::to_string(max_batch_));
  const float* in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(k, params_, in, acts_[i].data(), N);
    in = acts_[i].data();
  }
  return in;
}

void Model::backward(const ops::KernelTable& k, const float* x, const float* dlogits, int N,
                     const GradReadyHook& on_grads_ready) {
  const float* dout = dlogits;
  float* spare[2] = {grad_a_.data(), grad_b_.data()};
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const float* in = i == 0 ? x : acts_[i - 1].data();
    float* din = i == 0 ? nullptr : spare[i % 2];
    layers_[i]->backward(k, params_, in, acts_[i].data(), dout, din, N);
    if (on_grads_ready && !layers_[i]->param_indices().empty()) on_grads_ready(*layers_[i]);
    dout = din;
  }
}

}  // namespace ringtrain::nn
