// Where a zoo model's training step goes, node by node and per kind of layer, at several compute precisions
// side by side (issue 14: bf16 vs fp32). Each node's time is its forward + backward (nn::time_nodes: the
// model's own graph, one thread, synthetic data); the precisions' models alternate round by round, so the
// load of a shared machine hits them alike; the figures are medians over the rounds.
//
//   bench_zoo_nodes --model vit [--precisions fp32,bf16] [--batch 64] [--rounds 7] [--repeats 3] [--isa L] [--nodes]
//
// --isa: the kernels' level (default: this CPU's best, or RINGTRAIN_ISA); an unknown option, or one without
// its value, stops the run with an error (a misspelt option must not run the defaults).
//
// Prints, per kind of layer (conv, depthwise conv, linear, attention core, layer norm, ...), the summed
// median time in ms per step for each precision and each precision's speed-up over the first; --nodes
// adds one row per node.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/layer_description.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/node_timing.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

using namespace ringtrain;

namespace {

const char* arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

// A kind of layer, in words; depthwise convs apart from the others (they keep the rounding fallback in bf16).
std::string kind_of(const nn::Layer& layer) {
  using K = nn::LayerDescription::Kind;
  const nn::LayerDescription d = layer.describe();
  switch (d.kind) {
    case K::Conv2d: return d.groups > 1 ? "conv (depthwise)" : d.kernel == 1 ? "conv 1x1" : "conv";
    case K::Conv2dReluPool: return "conv+relu+pool";
    case K::Linear: case K::TokenLinear: return "linear";
    case K::SelfAttention: return "attention (qkv, core, out)";
    case K::BatchNorm2d: return "batch norm";
    case K::LayerNorm: return "layer norm";
    case K::GELU: return "gelu";
    case K::ReLU: case K::ReLU6: return "relu/relu6";
    case K::Add: return "add";
    case K::Dropout: return "dropout";
    case K::MaxPool2d: case K::GlobalAveragePool: return "pooling";
    default: return "other";
  }
}

}  // namespace

// Every argument is --nodes or one of the valued options followed by its value.
void check_arguments(int argc, char** argv) {
  const std::vector<std::string> valued = {"--model", "--precisions", "--batch", "--rounds", "--repeats", "--isa"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nodes") continue;
    if (std::find(valued.begin(), valued.end(), a) == valued.end())
      throw Error("unknown option '" + a + "' (see the comment at the top of bench/bench_zoo_nodes.cpp)");
    if (i + 1 >= argc) throw Error(a + " needs a value");
    ++i;
  }
}

int run(int argc, char** argv) {
  check_arguments(argc, argv);
  const std::string name = arg(argc, argv, "--model", "vit");
  const int batch = std::atoi(arg(argc, argv, "--batch", "64")), rounds = std::atoi(arg(argc, argv, "--rounds", "7")),
            repeats = std::atoi(arg(argc, argv, "--repeats", "3"));
  bool per_node = false;
  for (int i = 1; i < argc; ++i) per_node |= std::strcmp(argv[i], "--nodes") == 0;
  std::vector<ops::Precision> precs;
  for (std::string list = arg(argc, argv, "--precisions", "fp32,bf16"), rest; !list.empty(); list = rest) {
    const std::size_t comma = list.find(',');
    rest = comma == std::string::npos ? "" : list.substr(comma + 1);
    precs.push_back(ops::parse_precision(list.substr(0, comma)));
  }
  const ops::IsaLevel level = ops::parse_isa(arg(argc, argv, "--isa", ops::isa_name(ops::default_isa())));
  std::vector<std::unique_ptr<nn::Model>> models;
  for (std::size_t p = 0; p < precs.size(); ++p) {
    models.push_back(nn::make_model(name));
    models.back()->init_parameters(0);
  }
  const std::size_t L = models[0]->layers().size();
  std::vector<std::vector<std::vector<double>>> t(precs.size(), std::vector<std::vector<double>>(L));  // [p][node][round]
  for (int r = 0; r < rounds; ++r)
    for (std::size_t p = 0; p < precs.size(); ++p) {
      const std::vector<double> s = nn::time_nodes(*models[p], ops::kernels_for(level, precs[p]), batch, repeats);
      for (std::size_t i = 0; i < L; ++i) t[p][i].push_back(s[i]);
    }
  std::printf("%s, batch %d, %s, one thread: forward + backward per node, median of %d alternating rounds (each the "
              "median of %d passes), ms per step\n",
              name.c_str(), batch, ops::isa_name(level), rounds, repeats);
  for (std::size_t p = 1; p < precs.size(); ++p)
    std::printf("  %s: %s\n", ops::precision_name(precs[p]), ops::precision_path(level, precs[p]));
  std::map<std::string, std::vector<double>> kinds;  // kind -> summed medians per precision
  std::vector<double> total(precs.size(), 0.0);
  auto row = [&](const std::string& label, const std::vector<double>& ms) {
    std::printf("  %-44s", label.c_str());
    for (double v : ms) std::printf(" %9.3f", v);
    for (std::size_t p = 1; p < ms.size(); ++p) std::printf(" %8.2fx", ms[p] > 0 ? ms[0] / ms[p] : 0.0);
    std::printf("\n");
  };
  std::printf("  %-44s", "");
  for (ops::Precision p : precs) std::printf(" %9s", ops::precision_name(p));
  for (std::size_t p = 1; p < precs.size(); ++p)
    std::printf(" %4s/%s", ops::precision_name(precs[0]), ops::precision_name(precs[p]));
  std::printf("\n");
  for (std::size_t i = 0; i < L; ++i) {
    const nn::Layer& layer = *models[0]->layers()[i];
    std::vector<double> ms;
    for (std::size_t p = 0; p < precs.size(); ++p) ms.push_back(nn::median_seconds(t[p][i]) * 1e3);
    auto& k = kinds[kind_of(layer)];
    k.resize(precs.size(), 0.0);
    for (std::size_t p = 0; p < precs.size(); ++p) k[p] += ms[p], total[p] += ms[p];
    if (per_node) row(layer.name(), ms);
  }
  for (const auto& [kind, ms] : kinds) row(kind, ms);
  row("all nodes", total);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_zoo_nodes: %s\n", e.what());
    return 1;
  }
}
