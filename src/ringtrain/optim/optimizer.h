// Optimizers over one flat fp32 parameter buffer and its gradient buffer (the fp32 master weights).
// Updates follow torch.optim exactly, so a run can be checked step by step against PyTorch.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/thread_pool.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::optim {

// A named state buffer of an optimizer (for checkpoints): e.g. "exp_avg" with n floats.
struct StateBuffer {
  std::string name;
  float* data;
  std::size_t size;
};

// A run of the flat parameter buffer: [offset, offset + count).
struct Span {
  std::size_t offset = 0, count = 0;
};

// An optimizer keeps its state for the spans of the flat buffer it updates, packed one after another in
// span order: by default one span, the whole buffer; under optimizer-state sharding (ZeRO-1,
// dist::GradReducer's shard mode) the rank's slice of every gradient bucket, so the state is 1/W of the
// model's. step(), the EMA and the loss scaler touch only the spans; everything is element-wise, so the
// bits of every element are those of the unsharded optimizer.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of the spans of params from the same spans of grads.
  virtual void step(float* params, const float* grads) = 0;
  // Replaces the one whole-buffer span (before any step or EMA); the counts must add up to the state size.
  void set_spans(std::vector<Span> spans);
  const std::vector<Span>& spans() const { return spans_; }
  std::size_t state_floats() const { return n_; }  // each state buffer's size (the spans' total)
  // The state a checkpoint holds: the optimizer's own buffers, then "ema" when an average is kept.
  std::vector<StateBuffer> state();
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }

  // Exponential moving average of the weights (--ema DECAY), kept beside the optimizer so that checkpoints
  // (and their tensor-parallel gather/split) carry it as the state buffer "ema". enable_ema starts it at
  // `params`; update_ema, called after each applied step (steps() already counts it), does
  //   ema += (1 - d) * (params - ema),  d = min(decay, (1 + t) / (10 + t)),  t = steps()
  // (the usual warm-up, so early weights fade fast). Element-wise, so it is the same on shards.
  // params is the whole flat buffer (the EMA keeps the spans of it).
  void enable_ema(float decay, const float* params);
  // Exchanges the spans of params with the EMA (evaluation on the average, and back).
  void swap_ema(float* params);
  // Copies the EMA into the spans of params.
  void copy_ema_to(float* params) const;
  bool has_ema() const { return ema_decay_ > 0.0f; }
  float ema_decay() const { return ema_decay_; }
  float* ema() { return ema_.data(); }
  void update_ema(const float* params);
  // step() and update_ema() run on this pool's threads (the model's, --threads), each thread a contiguous
  // part of every span: the same bits, as every element's update reads only that element. Without it
  // (null, the default) they run on the calling thread; resnet18's Adam + EMA sweep over 11.2M parameters
  // is memory-bound and took a tenth of a one-thread step, serial while the rest of the step split.
  void set_thread_pool(ThreadPool* pool) { pool_ = pool; }

 protected:
  Optimizer(std::size_t n, float lr) : n_(n), lr_(lr), spans_{{0, n}} {}
  virtual std::vector<StateBuffer> own_state() = 0;
  // Calls f(span, packed offset of the span's state) for every span in order.
  template <typename F>
  void for_each_span(F&& f) const {
    std::size_t packed = 0;
    for (const Span& s : spans_) {
      f(s, packed);
      packed += s.count;
    }
  }
  // The same for element-wise work, split over the pool's threads: thread t gets the t-th of T parts of
  // every span (whole 16-float runs), f(part, packed offset of the part's state).
  template <typename F>
  void for_each_part(F&& f) const {
    if (!pool_ || pool_->size() == 1) return for_each_span(f);
    const std::size_t T = std::size_t(pool_->size());
    pool_->run([&](int t) {
      std::size_t packed = 0;
      for (const Span& s : spans_) {
        const std::size_t runs = (s.count + 15) / 16;
        const std::size_t a = std::min(s.count, runs * std::size_t(t) / T * 16);
        const std::size_t b = std::min(s.count, runs * (std::size_t(t) + 1) / T * 16);
        if (b > a) f(Span{s.offset + a, b - a}, packed + a);
        packed += s.count;
      }
    });
  }
  std::size_t n_;
  float lr_;
  int64_t steps_ = 0;
  float ema_decay_ = 0.0f;
  AlignedBuffer<float> ema_;
  std::vector<Span> spans_;
  ThreadPool* pool_ = nullptr;
};

struct AdamOptions {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};

// torch.optim.Adam (L2 weight decay added to the gradient, bias-corrected moments). The element loop is
// the adam_step op (ops/adam.h): the reference loop by default, a vectorised one from a KernelTable
// (use_kernels); every level gives the same bits.
class Adam : public Optimizer {
 public:
  Adam(std::size_t n, const AdamOptions& opt);
  void step(float* params, const float* grads) override;
  void use_kernels(const ops::KernelTable& k) { adam_step_ = k.adam_step; }

 private:
  std::vector<StateBuffer> own_state() override;
  AdamOptions opt_;
  void (*adam_step_)(float*, const float*, float*, float*, std::size_t, const ops::AdamStep&) = ops::ref::adam_step;
  AlignedBuffer<float> exp_avg_, exp_avg_sq_;
};

struct SgdOptions {
  float lr = 1e-2f, momentum = 0.9f, weight_decay = 0.0f;
  bool nesterov = false;
};

// torch.optim.SGD with momentum (dampening 0); the first step's buffer is the gradient itself.
class Sgd : public Optimizer {
 public:
  Sgd(std::size_t n, const SgdOptions& opt);
  void step(float* params, const float* grads) override;

 private:
  std::vector<StateBuffer> own_state() override;
  SgdOptions opt_;
  AlignedBuffer<float> momentum_;
};

}  // namespace ringtrain::optim
