// ONNX export (export/onnx_export.h) without Python: every zoo model's file parses back with the ONNX schema,
// passes ONNX's own C++ checker and strict shape inference, has the promised interface (input [batch, 1, 28,
// 28], output logits [batch, 10], opset 13) and carries every parameter and batch-norm statistic as an
// initializer of the same name, shape and bytes; nodes read only defined values, in order. A layer without a
// mapping is refused by name. (Skipped in a build without ONNX support.)
#include <gtest/gtest.h>

#ifdef RINGTRAIN_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ringtrain/core/error.h"
#include "ringtrain/export/onnx_export.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/parallel_linear.h"

namespace {

using namespace ringtrain;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ringtrain_test_" + name + ".onnx")).string();
}

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes.str())) << path;
  return m;
}

std::vector<std::string> dims(const onnx::ValueInfoProto& v) {
  std::vector<std::string> out;
  for (const auto& d : v.type().tensor_type().shape().dim())
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return out;
}

class OnnxExportZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxExportZoo, ChecksAndCarriesTheCheckpointTensors) {
  auto model = nn::make_model(GetParam());
  model->init_parameters(11);
  // Batch-norm statistics that are not their initial values, so a swapped mean and variance would show.
  for (std::size_t i = 0; i < model->params().buffer_floats(); ++i) model->params().buffers()[i] = 0.5f + 0.001f * float(i);
  const std::string path = temp_path(GetParam());
  const onnx_export::ExportSummary s = onnx_export::export_onnx(*model, path, {{"dataset", "digits"}});
  onnx::ModelProto m = read_model(path);
  std::filesystem::remove(path);
  EXPECT_EQ(s.nodes, std::size_t(m.graph().node_size()));

  ASSERT_NO_THROW(onnx::checker::check_model(m));
  onnx::ShapeInferenceOptions strict{true, 1, true};  // check types, error on any problem, data propagation
  ASSERT_NO_THROW(onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), strict));

  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), onnx_export::kOpset);
  ASSERT_EQ(m.graph().input_size(), 1);
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().input(0).name(), "input");
  EXPECT_EQ(dims(m.graph().input(0)), (std::vector<std::string>{"batch", "1", "28", "28"}));
  EXPECT_EQ(m.graph().output(0).name(), "logits");
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"batch", "10"}));
  std::map<std::string, std::string> props;
  for (const auto& p : m.metadata_props()) props[p.key()] = p.value();
  EXPECT_EQ(props["model"], GetParam());
  EXPECT_EQ(props["input_scaling"], "x/255");
  EXPECT_EQ(props["dataset"], "digits");

  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : m.graph().initializer()) inits[t.name()] = &t;
  auto expect_tensor = [&](const std::string& name, const Shape& shape, const float* data) {
    ASSERT_TRUE(inits.count(name)) << name << " is no initializer";
    const onnx::TensorProto& t = *inits[name];
    EXPECT_EQ(Shape(t.dims().begin(), t.dims().end()), shape) << name;
    ASSERT_EQ(t.raw_data().size(), std::size_t(shape_numel(shape)) * sizeof(float)) << name;
    EXPECT_EQ(std::memcmp(t.raw_data().data(), data, t.raw_data().size()), 0) << name << ": other values";
  };
  for (const nn::ParamView& v : model->params().views()) expect_tensor(v.name, v.shape, model->params().params() + v.offset);
  for (const nn::BufferView& v : model->params().buffer_views())
    if (!v.int64) expect_tensor(v.name, v.shape, model->params().buffers() + v.offset);

  // Topological order, no Identity or Dropout (OpenCV 4.6 needs neither), each value written once.
  std::set<std::string> defined = {"input"};
  for (const auto& t : m.graph().initializer()) defined.insert(t.name());
  for (const auto& n : m.graph().node()) {
    EXPECT_NE(n.op_type(), "Identity");
    EXPECT_NE(n.op_type(), "Dropout");
    for (const auto& in : n.input()) EXPECT_TRUE(defined.count(in)) << n.name() << " reads " << in << " before it is written";
    for (const auto& out : n.output()) EXPECT_TRUE(defined.insert(out).second) << out << " written twice";
  }
  EXPECT_TRUE(defined.count("logits"));
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxExportZoo, ::testing::ValuesIn(nn::model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(OnnxExport, RefusesALayerWithoutMapping) {
  nn::LocalTensorGroup group;
  auto model = nn::make_lenet5_tp(group);
  model->set_name("lenet5");
  const std::string path = temp_path("tp");
  try {
    onnx_export::export_onnx(*model, path);
    FAIL() << "exported a tensor-parallel layer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'fc1' has no ONNX mapping"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(OnnxExport, UnwritablePathIsAnErrorNamingIt) {
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  const std::string path = "/nonexistent-dir-ringtrain/m.onnx";
  try {
    onnx_export::export_onnx(*model, path);
    FAIL() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

}  // namespace

#else

TEST(OnnxExport, BuiltWithoutOnnx) { GTEST_SKIP() << "ringtrain was built without ONNX support"; }

#endif
