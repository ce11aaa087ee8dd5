#include "ringtrain/export/onnx_export.h"

#include <onnx/onnx_pb.h>

#include "ringtrain/core/error.h"
#include "ringtrain/data/atomic_file.h"
#include "ringtrain/export/onnx_graph.h"
#include "ringtrain/export/onnx_layers.h"

namespace ringtrain::onnx_export {

namespace {

// IR version 7 is the one that goes with opset 13 (ONNX 1.8); every reader of opset 13 takes it.
constexpr int64_t kIrVersion = 7;

// A float tensor [batch, dims...] with "batch" a dynamic dimension.
void batched_value(onnx::ValueInfoProto* v, const std::string& name, const Shape& per_sample) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : per_sample) t->mutable_shape()->add_dim()->set_dim_value(d);
}

}  // namespace

ExportSummary export_onnx(const nn::Model& model, const std::string& path,
                          const std::map<std::string, std::string>& metadata) {
  onnx::ModelProto proto;
  proto.set_ir_version(kIrVersion);
  proto.set_producer_name("ringtrain");
  proto.set_model_version(1);
  proto.set_doc_string(model.name() + " exported by ringtrain in eval mode; input: pixel / 255, no other scaling");
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  std::map<std::string, std::string> props = metadata;
  props["model"] = model.name();
  props["input_scaling"] = "x/255";
  for (const auto& [key, value] : props) {
    onnx::StringStringEntryProto* p = proto.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }

  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(model.name());
  OnnxGraph g(*graph);
  batched_value(graph->add_input(), "input", model.input_shape());

  // values[v]: the ONNX name of the model's value v (0: the input; i + 1: node i's output).
  std::vector<std::string> values = {"input"};
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    LayerInput in{*model.layers()[i], model.params(), {}, {}, model.value_shape(int(i) + 1)};
    for (int v : model.inputs_of(i)) {
      in.values.push_back(values[std::size_t(v)]);
      in.shapes.push_back(model.value_shape(v));
    }
    values.push_back(emit_layer(g, in));
  }
  check(values.back() != "input", "ONNX export: " + model.name() + " computes nothing");
  g.rename(values.back(), "logits");
  batched_value(graph->add_output(), "logits", model.value_shape(int(model.layers().size())));

  const std::string bytes = proto.SerializeAsString();
  check(!bytes.empty(), path + ": ONNX serialisation failed");
  data::AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
  return {std::size_t(graph->node_size()), std::size_t(graph->initializer_size()), bytes.size()};
}

}  // namespace ringtrain::onnx_export
