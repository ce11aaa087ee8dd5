// Checkpoint save/load over safetensors: weights under state_dict names, optimizer state under "optim.".
#include "ringtrain/train/checkpoint.h"

#include <cmath>
#include <cstring>
#include <set>

#include "ringtrain/core/error.h"
#include "ringtrain/train/safetensors.h"

namespace ringtrain::train {

namespace {

SafetensorsTensor f32_tensor(const std::string& name, const Shape& shape, const float* data, std::size_t n) {
  SafetensorsTensor t;
  t.name = name;
  t.dtype = DType::F32;
  t.shape = shape;
  t.bytes.resize(n * sizeof(float));
  if (n) std::memcpy(t.bytes.data(), data, n * sizeof(float));
  return t;
}

const SafetensorsTensor& expect_f32(const SafetensorsFile& file, const std::string& path, const std::string& name,
                                    const Shape& shape);

SafetensorsTensor i64_tensor(const std::string& name, const Shape& shape, const int64_t* data, std::size_t n) {
  SafetensorsTensor t;
  t.name = name;
  t.dtype = DType::I64;
  t.shape = shape;
  t.bytes.resize(n * sizeof(int64_t));
  if (n) std::memcpy(t.bytes.data(), data, n * sizeof(int64_t));
  return t;
}

// The tensor `name` of the file with this dtype and shape; throws naming path and tensor otherwise.
const SafetensorsTensor& expect_tensor(const SafetensorsFile& file, const std::string& path, const std::string& name,
                                       DType dtype, const Shape& shape) {
  const SafetensorsTensor* t = file.find(name);
  check(t != nullptr, path + ": tensor '" + name + "' is missing");
  check(t->dtype == dtype,
        path + ": tensor '" + name + "' is " + dtype_name(t->dtype) + ", expected " + dtype_name(dtype));
  check(t->shape == shape, path + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                               shape_str(shape));
  return *t;
}

void check_finite(const std::string& path, const std::string& name, const SafetensorsTensor& t, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, t.bytes.data() + i * sizeof(float), sizeof x);
    if (!std::isfinite(x)) throw Error(path + ": tensor '" + name + "' holds a non-finite value at index " + std::to_string(i));
  }
}

const SafetensorsTensor& expect_f32(const SafetensorsFile& file, const std::string& path, const std::string& name,
                                    const Shape& shape) {
  return expect_tensor(file, path, name, DType::F32, shape);
}

std::string join(const std::vector<optim::StateBuffer>& buffers) {
  std::string out;
  for (const auto& b : buffers) out += (out.empty() ? "" : ",") + b.name;
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Model& model, optim::Optimizer* optimizer,
                     const std::map<std::string, std::string>& metadata) {
  const nn::ParameterSet& params = model.params();
  std::vector<SafetensorsTensor> tensors;
  for (const auto& v : params.views())
    tensors.push_back(f32_tensor(v.name, v.shape, params.params() + v.offset, v.numel));
  for (const auto& b : params.buffer_views())
    tensors.push_back(b.int64 ? i64_tensor(b.name, b.shape, params.counters() + b.offset, b.numel)
                              : f32_tensor(b.name, b.shape, params.buffers() + b.offset, b.numel));

  std::map<std::string, std::string> meta = metadata;
  meta.emplace("model", model.name().empty() ? "lenet5" : model.name());
  meta.emplace("input_scaling", "x/255");
  meta["format"] = "ringtrain";
  meta["format_version"] = std::to_string(kCheckpointFormatVersion);
  for (auto it = meta.begin(); it != meta.end();)
    it = it->first.rfind(kOptimPrefix, 0) == 0 ? meta.erase(it) : std::next(it);  // ours alone, below

  if (optimizer) {
    std::vector<optim::StateBuffer> state = optimizer->state();
    for (const auto& b : state) {
      check(b.size == params.size(), path + ": optimizer buffer '" + b.name + "' holds " + std::to_string(b.size) +
                                         " floats, the model's parameter buffer " + std::to_string(params.size()));
      for (const auto& v : params.views())
        tensors.push_back(f32_tensor(kOptimPrefix + b.name + "." + v.name, v.shape, b.data + v.offset, v.numel));
    }
    meta[std::string(kOptimPrefix) + "state"] = join(state);
    meta[std::string(kOptimPrefix) + "step"] = std::to_string(optimizer->steps());
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.9g", double(optimizer->lr()));
    meta[std::string(kOptimPrefix) + "lr"] = lr;
  }
  write_safetensors(path, tensors, meta);
}

void check_model_matches(const std::map<std::string, std::string>& metadata, const std::string& path,
                         const nn::Model& model) {
  auto it = metadata.find("model");
  if (it == metadata.end() || model.name().empty()) return;  // e.g. a plain PyTorch file
  check(it->second == model.name(), path + ": is a " + it->second + " checkpoint, not " + model.name() +
                                        " (pass --model " + it->second + ")");
}

void load_weights(const std::string& path, nn::Model& model) {
  SafetensorsFile file = read_safetensors(path);
  check_model_matches(file.metadata, path, model);
  nn::ParameterSet& params = model.params();
  std::set<std::string> known;
  // Validate everything before touching the model.
  std::vector<const SafetensorsTensor*> found, found_buffers;
  for (const auto& v : params.views()) {
    known.insert(v.name);
    const SafetensorsTensor& t = expect_f32(file, path, v.name, v.shape);
    check_finite(path, v.name, t, v.numel);
    found.push_back(&t);
  }
  for (const auto& b : params.buffer_views()) {
    known.insert(b.name);
    const SafetensorsTensor& t = expect_tensor(file, path, b.name, b.int64 ? DType::I64 : DType::F32, b.shape);
    if (!b.int64) check_finite(path, b.name, t, b.numel);
    found_buffers.push_back(&t);
  }
  for (const auto& t : file.tensors)
    check(known.count(t.name) || t.name.rfind(kOptimPrefix, 0) == 0,
          path + ": unknown tensor '" + t.name + "' (this model has no such parameter or buffer)");
  for (std::size_t i = 0; i < params.views().size(); ++i) {
    const auto& v = params.views()[i];
    std::memcpy(params.param(int(i)), found[i]->bytes.data(), v.numel * sizeof(float));
  }
  for (std::size_t i = 0; i < params.buffer_views().size(); ++i) {
    const auto& b = params.buffer_views()[i];
    if (b.int64)
      std::memcpy(params.counter(int(i)), found_buffers[i]->bytes.data(), b.numel * sizeof(int64_t));
    else
      std::memcpy(params.buffer(int(i)), found_buffers[i]->bytes.data(), b.numel * sizeof(float));
  }
}

void load_optimizer_state(const std::string& path, optim::Optimizer& optimizer, const nn::Model& model) {
  SafetensorsFile file = read_safetensors(path);
  const nn::ParameterSet& params = model.params();
  std::vector<optim::StateBuffer> state = optimizer.state();
  const std::string state_key = std::string(kOptimPrefix) + "state";
  const std::string step_key = std::string(kOptimPrefix) + "step";

  auto it = file.metadata.find(state_key);
  check(it != file.metadata.end(), path + ": holds no optimizer state (no '" + state_key + "' metadata)");
  check(it->second == join(state), path + ": optimizer state is '" + it->second + "' but this optimizer keeps '" +
                                       join(state) + "'");
  auto st = file.metadata.find(step_key);
  check(st != file.metadata.end(), path + ": metadata '" + step_key + "' is missing");
  int64_t steps = 0;
  {
    const std::string& s = st->second;
    bool ok = !s.empty() && s.size() <= 18;
    for (char c : s) ok = ok && c >= '0' && c <= '9';
    check(ok, path + ": metadata '" + step_key + "' = '" + s + "' is not a non-negative integer");
    steps = std::stoll(s);
  }

  std::vector<std::vector<const SafetensorsTensor*>> found(state.size());
  for (std::size_t b = 0; b < state.size(); ++b) {
    check(state[b].size == params.size(), path + ": optimizer buffer '" + state[b].name + "' does not match the model");
    for (const auto& v : params.views())
      found[b].push_back(&expect_f32(file, path, kOptimPrefix + state[b].name + "." + v.name, v.shape));
  }
  for (std::size_t b = 0; b < state.size(); ++b)
    for (std::size_t i = 0; i < params.views().size(); ++i) {
      const auto& v = params.views()[i];
      std::memcpy(state[b].data + v.offset, found[b][i]->bytes.data(), v.numel * sizeof(float));
    }
  optimizer.set_steps(steps);
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path) {
  return read_safetensors(path).metadata;
}

}  // namespace ringtrain::train
