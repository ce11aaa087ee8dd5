// Checkpoints of a tensor-parallel model, still world-size independent (DESIGN.md): on save the shards
// (lenet5's fc1/fc2, vit's attention and MLP weights; and their optimizer state) are gathered over the tensor group into whole PyTorch-named
// tensors and world rank 0 writes one ordinary checkpoint (train/checkpoint.h); on load every rank reads
// the whole tensors and keeps its shard. A file saved with --tp 2 therefore loads with --tp 1, 4 or in
// PyTorch, and one saved without tensor parallelism loads with any --tp.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/model.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::train {

// Builds the same architecture whole (no tensor parallelism), for the names and shapes of the file.
// Empty (the default below): the zoo model the sharded one is named after (nn::make_model(model.name())).
using WholeModelFactory = std::function<std::unique_ptr<nn::Model>()>;
WholeModelFactory whole_model_factory(const std::string& name);
WholeModelFactory lenet5_factory();  // whole_model_factory("lenet5")

// Collective over each tensor group (every rank of the world calls it; ranks of other data-parallel
// groups gather too, which costs a few hundred KiB once); world rank 0 writes path. Throws Error naming
// path on failure (on rank 0).
void save_sharded_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                             const std::map<std::string, std::string>& metadata, dist::ProcessGrid& grid,
                             const WholeModelFactory& make_whole = {});

// Local: every rank reads path (it must see the same file) and takes its shard; as load_weights /
// load_optimizer_state, strict, the model or optimizer unchanged on error.
void load_sharded_weights(const std::string& path, nn::Model& model,
                          const WholeModelFactory& make_whole = {});
void load_sharded_optimizer_state(const std::string& path, optim::Optimizer& optimizer, const nn::Model& model,
                                  const WholeModelFactory& make_whole = {});

// An optimizer of the same kind and learning rate as `like` over n floats (Adam, SGD), for whole state.
std::unique_ptr<optim::Optimizer> optimizer_like(optim::Optimizer& like, std::size_t n);

}  // namespace ringtrain::train
