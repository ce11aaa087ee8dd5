// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's algorithm and defaults): the loss (here the
// gradient of the logits) is multiplied by scale() so small gradients survive fp16's range (values under
// 2^-24 flush to zero); before the optimizer the gradients are multiplied by 1/scale (a power of two, so
// exact) and checked for inf/NaN. A step with a non-finite gradient on any rank is skipped on every rank
// (the caller agrees the flag over the data-parallel group) and the scale backs off (x0.5); after
// growth_interval good steps in a row it grows (x2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "ringtrain/optim/optimizer.h"

namespace ringtrain::optim {

struct LossScalerOptions {
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
};

struct LossScaleStep {
  bool applied = true;    // false: skipped (some rank saw inf/NaN); the weights and optimizer state are unchanged
  float scale = 1.0f;     // the scale this step used
  float next_scale = 1.0f;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& opt = {});
  float scale() const { return scale_; }
  int growth_tracker() const { return growth_tracker_; }
  int64_t skipped_steps() const { return skipped_; }
  // Checkpoint state (torch's "scale" and "_growth_tracker").
  void set_state(float scale, int growth_tracker) { scale_ = scale, growth_tracker_ = growth_tracker; }

  // grads *= 1/scale in one pass that also looks for inf/NaN; returns true if this rank found one.
  bool unscale_and_check(float* grads, std::size_t n) const;
  // torch's update(): back off after a non-finite step, else count towards growth.
  void update(bool found_inf);
  // The whole step: unscale_and_check on the optimizer's spans of grads (all of it unless the optimizer
  // state is sharded), agree across ranks with any_rank(local) (the caller's all-reduce of the flag;
  // identity on one rank), then opt.step unless found, then update.
  LossScaleStep step(Optimizer& opt, float* params, float* grads, const std::function<bool(bool)>& any_rank = {});

 private:
  LossScalerOptions opt_;
  float scale_;
  int growth_tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace ringtrain::optim
