// The per-layer mapping of the ONNX exporter: one layer of a Model (its LayerDescription, its parameters)
// becomes ONNX nodes at opset 13 with eval-mode semantics. Every value between layers is the tensor
// [N, per-sample shape...] with N the dynamic batch; a layer may reshape inside its own nodes.
//
// The spellings are the ones OpenCV 4.6's dnn importer runs (found by experiment, docs/EXPORT.md): ReLU6 as
// Min(Relu(x), x * 0 + 6) (OpenCV 4.6 takes Clip only with opset-6 attributes), layer norm's means as a
// MatMul by a constant averaging matrix (its ReduceMean fails on token tensors), per-feature constants
// applied on [rows, D] or as [T, D] (its constant broadcasting covers only trailing-dimension blocks), the
// class token as x[:, :1] * 0 + token concatenated in front (no Expand to a dynamic batch).
#pragma once
#include <string>
#include <vector>

#include "ringtrain/export/onnx_graph.h"
#include "ringtrain/nn/layer.h"

namespace ringtrain::onnx_export {

// What one layer's translation reads.
struct LayerInput {
  const nn::Layer& layer;
  const nn::ParameterSet& params;
  std::vector<std::string> values;  // the ONNX names of the values the layer reads
  std::vector<Shape> shapes;        // their per-sample shapes
  Shape out_shape;                  // the layer's per-sample output shape
};

// Adds the layer's nodes and initializers (its parameters and buffers under their checkpoint names) and
// returns the ONNX name of its output (the input's for the identity: eval-mode dropout). Throws Error
// naming the layer when it has no mapping.
std::string emit_layer(OnnxGraph& g, const LayerInput& in);

}  // namespace ringtrain::onnx_export
