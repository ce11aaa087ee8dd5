// ONNX export of a zoo model (`ringtrain export`): the eval-mode graph at opset 13 with input "input" float
// [batch, 1, 28, 28] (pixel / 255, the scaling training uses; the graph does not scale) and output "logits"
// [batch, 10], "batch" a dynamic dimension. Parameters and batch-norm statistics are initializers under their
// checkpoint (PyTorch state_dict) names; dropout is left out. The layers' translation is onnx_layers.h; the
// format and what runs where are in docs/EXPORT.md. Built only with ONNX and protobuf (RINGTRAIN_HAVE_ONNX).
#pragma once
#include <cstddef>
#include <map>
#include <string>

#include "ringtrain/nn/model.h"

namespace ringtrain::onnx_export {

inline constexpr int kOpset = 13;

struct ExportSummary {
  std::size_t nodes = 0, initializers = 0, bytes = 0;
};

// Writes model (its current weights and buffers) to path atomically; metadata goes to the model's
// metadata_props beside "model" and "input_scaling". Throws Error naming path or the layer that has no mapping.
ExportSummary export_onnx(const nn::Model& model, const std::string& path,
                          const std::map<std::string, std::string>& metadata = {});

}  // namespace ringtrain::onnx_export
