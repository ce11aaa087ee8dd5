// Optimizers over one flat fp32 parameter buffer and its gradient buffer (the fp32 master weights).
// Updates follow torch.optim exactly, so a run can be checked step by step against PyTorch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/ops/kernels.h"

namespace ringtrain::optim {

// A named state buffer of an optimizer (for checkpoints): e.g. "exp_avg" with n floats.
struct StateBuffer {
  std::string name;
  float* data;
  std::size_t size;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of params[0..n) from grads[0..n).
  virtual void step(float* params, const float* grads) = 0;
  virtual std::vector<StateBuffer> state() = 0;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }

 protected:
  Optimizer(std::size_t n, float lr) : n_(n), lr_(lr) {}
  std::size_t n_;
  float lr_;
  int64_t steps_ = 0;
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
  std::vector<StateBuffer> state() override;
  void use_kernels(const ops::KernelTable& k) { adam_step_ = k.adam_step; }

 private:
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
  std::vector<StateBuffer> state() override;

 private:
  SgdOptions opt_;
  AlignedBuffer<float> momentum_;
};

}  // namespace ringtrain::optim
