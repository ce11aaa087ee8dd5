#include "ringtrain/train/memory_report.h"

#include <cstdio>
#include <map>
#include <vector>

namespace ringtrain::train {

namespace {
std::string layer_of(const std::string& name) { return name.substr(0, name.find('.')); }
bool is_fc(const std::string& layer) { return layer.rfind("fc", 0) == 0; }
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
  }
  return t;
}

std::string memory_report(const nn::ParameterSet& params, int optimizer_buffers, const std::string& who) {
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
  std::snprintf(line, sizeof line, "  %-6s %12s %12s %12s %8s\n", "layer", "params", "grads", "optimizer", "of layer");
  out += line;
  const MemoryTotals t = memory_totals(params);
  for (const auto& r : rows) {
    const std::size_t b = r.mine * sizeof(float);
    std::snprintf(line, sizeof line, "  %-6s %12zu %12zu %12zu %7.1f%%\n", r.layer.c_str(), b, b,
                  b * std::size_t(optimizer_buffers), 100.0 * double(r.mine) / double(r.whole));
    out += line;
  }
  const std::size_t b = t.params * sizeof(float);
  std::snprintf(line, sizeof line, "  %-6s %12zu %12zu %12zu %7.1f%%  (buffers with padding: %zu bytes each)\n",
                "total", b, b, b * std::size_t(optimizer_buffers), 100.0 * double(t.params) / double(t.whole),
                params.size() * sizeof(float));
  out += line;
  std::snprintf(line, sizeof line,
                "  fully connected layers: %zu of %zu parameters on this rank (%.1f%%; the same share of their "
                "gradients and optimizer state)\n",
                t.fc_params, t.fc_whole, 100.0 * t.fc_share());
  out += line;
  return out;
}

}  // namespace ringtrain::train
