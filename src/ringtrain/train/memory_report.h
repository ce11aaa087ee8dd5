// Memory report: the bytes of parameters, gradients and optimizer state this rank holds, per layer, and
// the share of the whole model's split part that is (the point of tensor parallelism): lenet5's fully
// connected layers (fc*), vit's encoder (every tensor named encoder.*: the blocks, whose attention and MLP
// weights --tp splits, with their replicated layer norms and biases, and the position embedding and the
// final layer norm).
// Counts real elements (views' numel); the flat buffers add up to 15 floats of alignment padding a view,
// shown on the total line.
#pragma once
#include <cstddef>
#include <string>

#include "ringtrain/nn/parameters.h"

namespace ringtrain::train {

struct MemoryTotals {
  std::size_t params = 0, whole = 0;        // elements on this rank / of the whole model
  std::size_t fc_params = 0, fc_whole = 0;  // the same, fully connected layers (fc*) only
  std::size_t encoder_params = 0, encoder_whole = 0;  // the same, a transformer's encoder (encoder.*)
  double fc_share() const { return fc_whole ? double(fc_params) / double(fc_whole) : 0.0; }
  double encoder_share() const { return encoder_whole ? double(encoder_params) / double(encoder_whole) : 0.0; }
};
MemoryTotals memory_totals(const nn::ParameterSet& params);

// A table, one line a layer: parameters, gradients and optimizer state in bytes (optimizer_buffers
// state floats per parameter: Adam 2, SGD 1), this rank's share of the layer; then totals and the fc
// or encoder share. `who` heads the table, e.g. "rank 1 (dp 0, tp 1 of 2)".
// Then the non-trainable buffers and, when given, the bytes of activations (and their gradients).
std::string memory_report(const nn::ParameterSet& params, int optimizer_buffers, const std::string& who,
                          std::size_t activation_bytes = 0);

}  // namespace ringtrain::train
