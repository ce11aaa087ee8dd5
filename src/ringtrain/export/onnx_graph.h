// OnnxGraph: a small builder over an onnx::GraphProto (Debian's libonnx-dev classes, written out by
// protobuf): initializers from fp32 data under given names, shared constants, and nodes with attributes.
// Every value name is used once as an output; every node is named after its output.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ringtrain/core/tensor.h"

namespace ringtrain::onnx_export {

// One node attribute: an int, a float or a list of ints (all the exporter needs).
struct Attr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>> value;
};

class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto& graph) : graph_(graph) {}

  // An fp32 initializer called `name` holding numel(shape) floats from data; returns name. Throws on a
  // name already used.
  const std::string& initializer(const std::string& name, const Shape& shape, const float* data);
  // A 1-D int64 initializer (a Reshape target, Split sizes, Slice bounds) called name.
  const std::string& ints(const std::string& name, const std::vector<int64_t>& values);
  // A scalar fp32 constant, one initializer per distinct value for the whole graph ("scalar.6").
  std::string scalar(float value);
  // A shared fp32 constant: made by `make` the first time `name` is asked for, reused afterwards.
  template <typename Make>
  std::string shared(const std::string& name, const Shape& shape, Make make) {
    if (!names_.count(name)) {
      const std::vector<float> values = make();
      initializer(name, shape, values.data());
    }
    return name;
  }

  // A node of type op (default domain) reading inputs and writing the value `output`; returns output.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                   const std::vector<Attr>& attrs = {});
  // A node with several outputs (Split), named after the first.
  void node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<Attr>& attrs = {});
  // Renames a value everywhere it is read or written (the graph's last value becomes "logits").
  void rename(const std::string& from, const std::string& to);

 private:
  void claim(const std::string& name);
  onnx::GraphProto& graph_;
  std::set<std::string> names_;  // every initializer and node output so far
};

}  // namespace ringtrain::onnx_export
