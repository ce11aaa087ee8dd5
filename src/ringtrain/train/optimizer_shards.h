// Optimizer state under sharding (--shard-optimizer, ZeRO stage 1) to and from whole tensors, so that
// checkpoints stay world-size independent: a sharded run's checkpoint holds the same whole "optim."
// tensors an unsharded run writes, and any world size, sharded or not, resumes from it.
#pragma once
#include <cstddef>
#include <memory>

#include "ringtrain/dist/grad_reducer.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::train {

// Collective over the reducer's data-parallel group: an optimizer over the whole buffer of n floats
// (same kind, step count, learning rate and EMA) whose state holds every rank's slices, gathered by the
// reducer's all-gather. Costs the whole state's memory while it lives (a checkpoint's write).
std::unique_ptr<optim::Optimizer> gather_optimizer_state(optim::Optimizer& shard, dist::GradReducer& reducer,
                                                         std::size_t n);

// Local: shard's spans of state taken from a whole optimizer (read from a checkpoint), and its step count.
void take_optimizer_shard(optim::Optimizer& whole, optim::Optimizer& shard);

}  // namespace ringtrain::train
