// Checkpoints: PyTorch state_dict names and shapes, bit-exact round trips of weights and optimizer state,
// strict loading (missing, mis-shaped, mis-typed, unknown or non-finite tensors are one-line errors naming the
// file and the tensor), and the PyTorch side: scripts/torch_check.py loads a checkpoint with
// load_state_dict(strict=True) and agrees with the C++ predictions (skipped where /usr/bin/python3 lacks torch).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/safetensors.h"

using namespace ringtrain;
using namespace ringtrain::train;

namespace {

std::string temp_dir() {
  static std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("ringtrain_checkpoint_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  static const struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup;
  return dir;
}

// Random gradients through a few optimizer steps, so every state buffer holds something.
void take_steps(optim::Optimizer& opt, nn::Model& model, int steps, uint64_t seed) {
  Rng rng(seed);
  nn::ParameterSet& p = model.params();
  for (int s = 0; s < steps; ++s) {
    for (const auto& v : p.views())
      for (std::size_t i = 0; i < v.numel; ++i) p.grads()[v.offset + i] = rng.uniform(-1e-2f, 1e-2f);
    opt.step(p.params(), p.grads());
  }
}

bool same_floats(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Expects f() to throw an Error starting with "<path>: " and containing every one of `parts`.
template <typename F>
void expect_error(F f, const std::string& path, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg << "\nlacks: " << part;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// The weights of a model as safetensors tensors (to build altered files).
std::vector<SafetensorsTensor> weight_tensors(const nn::Model& model) {
  std::vector<SafetensorsTensor> out;
  for (const auto& v : model.params().views()) {
    SafetensorsTensor t{v.name, DType::F32, v.shape, std::vector<uint8_t>(v.numel * 4)};
    std::memcpy(t.bytes.data(), model.params().params() + v.offset, v.numel * 4);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TEST(Checkpoint, HoldsPyTorchStateDictNamesShapesAndMetadata) {
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  optim::Adam adam(model->params().size(), {});
  take_steps(adam, *model, 2, 5);
  const std::string path = temp_dir() + "/names.safetensors";
  save_checkpoint(path, *model, &adam, {{"dataset", "digits"}});

  SafetensorsFile f = read_safetensors(path);
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"conv1.weight", {6, 1, 5, 5}}, {"conv1.bias", {6}},   {"conv2.weight", {16, 6, 5, 5}}, {"conv2.bias", {16}},
      {"fc1.weight", {120, 400}},     {"fc1.bias", {120}},   {"fc2.weight", {84, 120}},       {"fc2.bias", {84}},
      {"fc3.weight", {10, 84}},       {"fc3.bias", {10}}};
  int64_t weights = 0;
  for (const auto& [name, shape] : expected) {
    const SafetensorsTensor* t = f.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, DType::F32) << name;
    EXPECT_EQ(t->shape, shape) << name;
    weights += shape_numel(shape);
    for (const char* buffer : {"exp_avg", "exp_avg_sq"}) {
      const SafetensorsTensor* s = f.find(std::string("optim.") + buffer + "." + name);
      ASSERT_NE(s, nullptr) << buffer << " " << name;
      EXPECT_EQ(s->shape, shape);
    }
  }
  EXPECT_EQ(weights, nn::kLeNet5Parameters);
  EXPECT_EQ(f.tensors.size(), 30u);
  EXPECT_EQ(f.metadata.at("model"), "lenet5");
  EXPECT_EQ(f.metadata.at("format"), "ringtrain");
  EXPECT_EQ(f.metadata.at("format_version"), "1");
  EXPECT_EQ(f.metadata.at("input_scaling"), "x/255");
  EXPECT_EQ(f.metadata.at("dataset"), "digits");
  EXPECT_EQ(f.metadata.at("optim.step"), "2");
  EXPECT_EQ(f.metadata.at("optim.state"), "exp_avg,exp_avg_sq");
  // The row-major layout is PyTorch's: conv1.weight[k][c][r][s] is element ((k*1 + c)*5 + r)*5 + s.
  const SafetensorsTensor* w = f.find("conv1.weight");
  float v;
  std::memcpy(&v, w->bytes.data() + (((3 * 1 + 0) * 5 + 2) * 5 + 4) * 4, 4);
  EXPECT_EQ(v, model->params().param(0)[((3 * 1 + 0) * 5 + 2) * 5 + 4]);
}

TEST(Checkpoint, RoundTripIsBitExactForWeightsAndAdamState) {
  auto model = nn::make_lenet5();
  model->init_parameters(7);
  optim::AdamOptions ao;
  ao.weight_decay = 0.01f;
  optim::Adam adam(model->params().size(), ao);
  take_steps(adam, *model, 3, 9);
  const std::string path = temp_dir() + "/adam.safetensors";
  save_checkpoint(path, *model, &adam);

  auto restored = nn::make_lenet5();
  restored->init_parameters(8);
  load_weights(path, *restored);
  optim::Adam adam2(restored->params().size(), ao);
  load_optimizer_state(path, adam2, *restored);
  EXPECT_EQ(adam2.steps(), 3);
  for (std::size_t i = 0; i < model->params().views().size(); ++i) {
    const auto& v = model->params().views()[i];
    EXPECT_TRUE(same_floats(model->params().param(int(i)), restored->params().param(int(i)), v.numel)) << v.name;
  }
  auto s1 = adam.state(), s2 = adam2.state();
  ASSERT_EQ(s1.size(), s2.size());
  for (std::size_t b = 0; b < s1.size(); ++b)
    EXPECT_TRUE(same_floats(s1[b].data, s2[b].data, s1[b].size)) << s1[b].name;

  // A resumed run continues exactly as the original: one more identical step gives identical weights.
  take_steps(adam, *model, 1, 100);
  take_steps(adam2, *restored, 1, 100);
  EXPECT_TRUE(same_floats(model->params().params(), restored->params().params(), model->params().size()));
}

TEST(Checkpoint, SgdStateRoundTripsAndKindsDoNotMix) {
  auto model = nn::make_lenet5();
  model->init_parameters(3);
  optim::Sgd sgd(model->params().size(), {});
  take_steps(sgd, *model, 2, 4);
  const std::string path = temp_dir() + "/sgd.safetensors";
  save_checkpoint(path, *model, &sgd);
  optim::Sgd sgd2(model->params().size(), {});
  load_optimizer_state(path, sgd2, *model);
  EXPECT_EQ(sgd2.steps(), 2);
  EXPECT_TRUE(same_floats(sgd.state()[0].data, sgd2.state()[0].data, sgd.state()[0].size));
  optim::Adam adam(model->params().size(), {});
  expect_error([&] { load_optimizer_state(path, adam, *model); }, path, {"momentum_buffer", "exp_avg"});
}

TEST(Checkpoint, WeightsOnlyFilesLoadAndHaveNoOptimizerState) {
  auto model = nn::make_lenet5();
  model->init_parameters(11);
  const std::string path = temp_dir() + "/weights_only.safetensors";
  save_checkpoint(path, *model, nullptr);
  EXPECT_EQ(read_safetensors(path).tensors.size(), 10u);
  auto other = nn::make_lenet5();
  load_weights(path, *other);
  EXPECT_TRUE(same_floats(model->params().params(), other->params().params(), model->params().size()));
  optim::Adam adam(model->params().size(), {});
  expect_error([&] { load_optimizer_state(path, adam, *model); }, path, {"no optimizer state"});

  // A file as PyTorch's safetensors.torch.save_file would write it: tensors only, no metadata.
  const std::string plain = temp_dir() + "/plain.safetensors";
  write_safetensors(plain, weight_tensors(*model));
  auto third = nn::make_lenet5();
  load_weights(plain, *third);
  EXPECT_TRUE(same_floats(model->params().params(), third->params().params(), model->params().size()));
}

TEST(Checkpoint, StrictLoadingRejectsBadFilesAndLeavesTheModelUnchanged) {
  auto source = nn::make_lenet5();
  source->init_parameters(21);
  auto target = nn::make_lenet5();
  target->init_parameters(22);
  std::vector<float> before(target->params().params(), target->params().params() + target->params().size());
  const std::string path = temp_dir() + "/bad.safetensors";
  auto try_load = [&](std::vector<SafetensorsTensor> tensors, std::initializer_list<std::string> parts) {
    write_safetensors(path, tensors, {{"model", "lenet5"}});
    expect_error([&] { load_weights(path, *target); }, path, parts);
    EXPECT_TRUE(same_floats(before.data(), target->params().params(), before.size()));
  };

  auto t = weight_tensors(*source);
  t.pop_back();
  try_load(t, {"'fc3.bias'", "missing"});  // missing tensor

  t = weight_tensors(*source);
  t[4].shape = {400, 120};
  try_load(t, {"'fc1.weight'", "[400,120]", "[120,400]"});  // wrong shape

  t = weight_tensors(*source);
  t[1].dtype = DType::I32;
  try_load(t, {"'conv1.bias'", "I32", "F32"});  // wrong dtype, same size

  t = weight_tensors(*source);
  t[9].dtype = DType::F64;
  t[9].shape = {5};
  try_load(t, {"'fc3.bias'"});  // F64 of the same byte count

  t = weight_tensors(*source);
  t.push_back({"fc4.weight", DType::F32, {2}, std::vector<uint8_t>(8)});
  try_load(t, {"unknown tensor 'fc4.weight'"});  // unknown tensor

  t = weight_tensors(*source);
  float nan = std::nanf("");
  std::memcpy(t[2].bytes.data() + 40, &nan, 4);
  try_load(t, {"'conv2.weight'", "non-finite", "index 10"});

  // optim.* tensors are not unknown, whatever they are.
  t = weight_tensors(*source);
  t.push_back({"optim.anything", DType::U8, {3}, std::vector<uint8_t>(3)});
  write_safetensors(path, t);
  load_weights(path, *target);
  EXPECT_TRUE(same_floats(source->params().params(), target->params().params(), before.size()));
}

TEST(Checkpoint, CorruptOrMissingFilesAreErrorsNamingTheFile) {
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  const std::string path = temp_dir() + "/cut.safetensors";
  save_checkpoint(path, *model, nullptr);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 17);
  expect_error([&] { load_weights(path, *model); }, path, {"run past"});
  const std::string none = temp_dir() + "/none.safetensors";
  expect_error([&] { load_weights(none, *model); }, none, {"cannot open"});
  expect_error([&] { save_checkpoint(temp_dir() + "/missing_dir/x.safetensors", *model, nullptr); },
               temp_dir() + "/missing_dir/x.safetensors", {"cannot create"});
}

TEST(Checkpoint, OptimizerStateErrorsNameTheTensor) {
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  optim::Adam adam(model->params().size(), {});
  take_steps(adam, *model, 1, 1);
  const std::string path = temp_dir() + "/optim_bad.safetensors";
  save_checkpoint(path, *model, &adam);
  SafetensorsFile f = read_safetensors(path);

  std::vector<SafetensorsTensor> t;
  for (auto& x : f.tensors)
    if (x.name != "optim.exp_avg_sq.fc2.bias") t.push_back(x);
  write_safetensors(path, t, f.metadata);
  optim::Adam fresh(model->params().size(), {});
  expect_error([&] { load_optimizer_state(path, fresh, *model); }, path, {"'optim.exp_avg_sq.fc2.bias'", "missing"});
  EXPECT_EQ(fresh.steps(), 0);

  auto meta = f.metadata;
  meta["optim.step"] = "-3";
  write_safetensors(path, f.tensors, meta);
  expect_error([&] { load_optimizer_state(path, fresh, *model); }, path, {"optim.step", "-3"});
}

// --- PyTorch side: scripts/torch_check.py ------------------------------------------------------------------

namespace {

int run(const std::string& command) {
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void write_idx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  const uint8_t magic[4] = {0, 0, 0x08, uint8_t(dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (uint32_t d : dims) {
    const uint8_t be[4] = {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

}  // namespace

TEST(Checkpoint, TorchCheckLoadsItStrictlyAndAgreesWithTheCppPredictions) {
  if (run("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch (Debian's python3-torch)";
  const int N = 300;
  Rng rng(77);
  std::vector<uint8_t> pixels(std::size_t(N) * 784), labels(N);
  for (auto& p : pixels) p = rng.below(3) == 0 ? uint8_t(rng.below(256)) : 0;
  for (auto& l : labels) l = uint8_t(rng.below(10));
  const std::string dir = temp_dir() + "/idx";
  std::filesystem::create_directories(dir);
  write_idx(dir + "/t10k-images-idx3-ubyte", {uint32_t(N), 28, 28}, pixels);
  write_idx(dir + "/t10k-labels-idx1-ubyte", {uint32_t(N)}, labels);

  auto model = nn::make_lenet5();
  model->init_parameters(5);
  optim::Adam adam(model->params().size(), {});
  take_steps(adam, *model, 1, 3);  // optimizer tensors in the file too: the script must drop them
  const std::string ckpt = temp_dir() + "/torch.safetensors";
  save_checkpoint(ckpt, *model, &adam);

  model->reserve(N);
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(pixels[i]) / 255.0f;
  const float* logits = model->forward(ops::reference_kernels(), x.data(), N);
  std::vector<int> predicted(N);
  {
    std::ofstream out(temp_dir() + "/preds.txt");
    for (int n = 0; n < N; ++n) {
      predicted[n] = int(std::max_element(logits + n * 10, logits + n * 10 + 10) - (logits + n * 10));
      out << predicted[n] << "\n";
    }
  }
  const std::string script = std::string("/usr/bin/python3 ") + RINGTRAIN_SOURCE_DIR + "/scripts/torch_check.py ";
  EXPECT_EQ(run(script + ckpt + " " + dir + " --predictions " + temp_dir() + "/preds.txt"), 0);

  // One disagreement in 300 is 99.67% < 99.9%: must fail. A wrong count must fail too.
  {
    std::ofstream out(temp_dir() + "/wrong.txt");
    for (int n = 0; n < N; ++n) out << (n == 17 ? (predicted[n] + 1) % 10 : predicted[n]) << "\n";
  }
  EXPECT_NE(run(script + ckpt + " " + dir + " --predictions " + temp_dir() + "/wrong.txt 2>/dev/null"), 0);
  {
    std::ofstream out(temp_dir() + "/short.txt");
    out << "1\n2\n";
  }
  EXPECT_NE(run(script + ckpt + " " + dir + " --predictions " + temp_dir() + "/short.txt 2>/dev/null"), 0);
}
