#include "ringtrain/export/onnx_graph.h"

#include <cstdio>
#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::onnx_export {

void OnnxGraph::claim(const std::string& name) {
  check(names_.insert(name).second, "ONNX export: the value name '" + name + "' is used twice");
}

const std::string& OnnxGraph::initializer(const std::string& name, const Shape& shape, const float* data) {
  claim(name);
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  // raw_data is little-endian IEEE 754, which is this machine's float layout (x86-64).
  t->set_raw_data(data, std::size_t(shape_numel(shape)) * sizeof(float));
  return t->name();
}

const std::string& OnnxGraph::ints(const std::string& name, const std::vector<int64_t>& values) {
  claim(name);
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(int64_t(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return t->name();
}

std::string OnnxGraph::scalar(float value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "scalar.%.9g", double(value));
  const std::string name = buf;
  if (!names_.count(name)) initializer(name, {}, &value);
  return name;
}

std::string OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                            const std::vector<Attr>& attrs) {
  node(op, inputs, std::vector<std::string>{output}, attrs);
  return output;
}

void OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, const std::vector<Attr>& attrs) {
  for (const std::string& out : outputs) claim(out);
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(outputs.at(0));
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(*f);
    } else {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : std::get<std::vector<int64_t>>(a.value)) p->add_ints(v);
    }
  }
}

void OnnxGraph::rename(const std::string& from, const std::string& to) {
  claim(to);
  names_.erase(from);
  for (onnx::NodeProto& n : *graph_.mutable_node()) {
    for (std::string& in : *n.mutable_input())
      if (in == from) in = to;
    for (std::string& out : *n.mutable_output())
      if (out == from) {
        out = to;
        n.set_name(to);
      }
  }
}

}  // namespace ringtrain::onnx_export
