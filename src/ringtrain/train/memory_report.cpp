#include "ringtrain/train/memory_report.h"

#include <cctype>
#include <cstdio>
#include <algorithm>
#include <map>
#include <vector>

namespace ringtrain::train {

namespace {
// The row a tensor is counted in: its top-level module, down to the block for the zoo's repeated blocks
// ("layer1.0", "features.3", "encoder.layers.encoder_layer_2"), so a table stays a screen long.
std::string layer_of(const std::string& name) {
  std::size_t end = name.find('.');
  if (end == std::string::npos) return name;
  if (name.compare(0, end + 1, "encoder.") == 0 && name.compare(end + 1, 7, "layers.") == 0) {
    const std::size_t block = name.find('.', end + 8);
    return name.substr(0, block);
  }
  const std::size_t next = name.find('.', end + 1);
  if (next != std::string::npos && std::isdigit(static_cast<unsigned char>(name[end + 1]))) return name.substr(0, next);
  return name.substr(0, end);
}
bool is_fc(const std::string& layer) { return layer.rfind("fc", 0) == 0; }
bool is_encoder(const std::string& name) { return name.rfind("encoder.", 0) == 0; }
}  // namespace

MemoryTotals memory_totals(const nn::ParameterSet& params) {
  MemoryTotals t;
  for (const auto& v : params.views()) {
    const std::size_t whole = std::size_t(shape_numel(v.shard.full));
    t.params += v.numel;
    t.whole += whole;
    if (is_fc(layer_of(v.name))) {
      t.fc_params += v.numel;
      t.fc_whole += whole;
    }
    if (is_encoder(v.name)) {
      t.encoder_params += v.numel;
      t.encoder_whole += whole;
    }
  }
  return t;
}

std::string memory_report(const nn::ParameterSet& params, int optimizer_buffers, const std::string& who,
                          std::size_t activation_bytes) {
  struct Row {
    std::string layer;
    std::size_t mine = 0, whole = 0;
  };
  std::vector<Row> rows;
  for (const auto& v : params.views()) {
    const std::string layer = layer_of(v.name);
    if (rows.empty() || rows.back().layer != layer) rows.push_back({layer});
    rows.back().mine += v.numel;
    rows.back().whole += std::size_t(shape_numel(v.shard.full));
  }
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "memory, %s: bytes held per layer (fp32; optimizer state %d buffer(s))\n",
                who.c_str(), optimizer_buffers);
  out += line;
  std::size_t width = 6;
  for (const auto& r : rows) width = std::max(width, r.layer.size());
  const int w = int(width);
  std::snprintf(line, sizeof line, "  %-*s %12s %12s %12s %8s\n", w, "layer", "params", "grads", "optimizer", "of layer");
  out += line;
  const MemoryTotals t = memory_totals(params);
  for (const auto& r : rows) {
    const std::size_t b = r.mine * sizeof(float);
    std::snprintf(line, sizeof line, "  %-*s %12zu %12zu %12zu %7.1f%%\n", w, r.layer.c_str(), b, b,
                  b * std::size_t(optimizer_buffers), 100.0 * double(r.mine) / double(r.whole));
    out += line;
  }
  const std::size_t b = t.params * sizeof(float);
  std::snprintf(line, sizeof line, "  %-*s %12zu %12zu %12zu %7.1f%%  (buffers with padding: %zu bytes each)\n",
                w, "total", b, b, b * std::size_t(optimizer_buffers), 100.0 * double(t.params) / double(t.whole),
                params.size() * sizeof(float));
  out += line;
  if (t.fc_whole > 0) {
    std::snprintf(line, sizeof line,
                  "  fully connected layers: %zu of %zu parameters on this rank (%.1f%%; the same share of their "
                  "gradients and optimizer state)\n",
                  t.fc_params, t.fc_whole, 100.0 * t.fc_share());
    out += line;
  }
  if (t.encoder_whole > 0) {
    std::snprintf(line, sizeof line,
                  "  encoder: %zu of %zu parameters on this rank (%.1f%%; the same share of their gradients and "
                  "optimizer state)\n",
                  t.encoder_params, t.encoder_whole, 100.0 * t.encoder_share());
    out += line;
  }
  std::size_t buffer_elements = 0;
  for (const auto& v : params.buffer_views()) buffer_elements += v.numel * (v.int64 ? 2 : 1);
  if (buffer_elements > 0) {
    std::snprintf(line, sizeof line, "  non-trainable buffers (batch-norm statistics): %zu bytes\n",
                  buffer_elements * sizeof(float));
    out += line;
  }
  if (activation_bytes > 0) {
    std::snprintf(line, sizeof line, "  activations and their gradients for the reserved batch: %zu bytes\n",
                  activation_bytes);
    out += line;
  }
  return out;
}

}  // namespace ringtrain::train
