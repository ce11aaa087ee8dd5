// Checkpoints: safetensors files whose weights carry PyTorch's state_dict names, shapes and layout
// (conv1.weight [6,1,5,5] ... fc3.bias [10], F32), so `model.load_state_dict(load_file(path), strict=True)`
// works in PyTorch after dropping the "optim." entries. Optimizer state sits beside the weights, one tensor
// per state buffer and parameter ("optim.exp_avg.conv1.weight"), with its step count in the metadata. Nothing
// in a checkpoint depends on the world size. See docs/CHECKPOINTS.md.
#pragma once
#include <map>
#include <string>

#include "ringtrain/nn/model.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain::train {

constexpr int kCheckpointFormatVersion = 1;
// Prefix of every optimizer tensor and metadata key.
inline constexpr const char* kOptimPrefix = "optim.";

// Writes the model's weights and, if optimizer is not null, its state (atomically). metadata is stored
// as given, plus "format" = "ringtrain", "format_version" = "1" and, unless given, "model" = model.name()
// and "input_scaling" = "x/255". Buffers (batch norm's running statistics, F32, and num_batches_tracked,
// I64) are saved under their names beside the weights. Throws Error naming path.
void save_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                     const std::map<std::string, std::string>& metadata = {});

// Loads weights and buffers into the model, strictly: a file whose metadata names another model is
// refused first ("<path>: is a resnet18 checkpoint, not lenet5"); every parameter present as F32 with its
// exact shape and finite values, every buffer with its dtype (F32, or I64 for counters) and shape, and no
// tensor the model does not have except "optim.*" ones. Throws Error("<path>: ...") naming the tensor
// otherwise; the model is unchanged on error. Plain PyTorch safetensors files load too.
void load_weights(const std::string& path, nn::Model& model);
// Throws unless metadata's "model" (when present) is model.name().
void check_model_matches(const std::map<std::string, std::string>& metadata, const std::string& path,
                         const nn::Model& model);

// Restores the optimizer's state buffers and step count for a resumed run (the optimizer must be the
// same kind, over model's ParameterSet). Throws Error naming path and tensor if anything is missing or
// mismatched; the optimizer is unchanged on error.
void load_optimizer_state(const std::string& path, optim::Optimizer& optimizer, const nn::Model& model);

// The metadata of a checkpoint (or any safetensors file).
std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path);

}  // namespace ringtrain::train
