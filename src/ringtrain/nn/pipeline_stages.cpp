#include "ringtrain/nn/pipeline_stages.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

namespace {
std::string list_points(const std::vector<int>& points) {
  std::string s;
  for (std::size_t i = 0; i < points.size() && i < 40; ++i) s += (i ? "," : "") + std::to_string(points[i]);
  if (points.size() > 40) s += ",...";
  return s.empty() ? "none" : s;
}
}  // namespace

std::vector<int> chain_points(const Model& model) {
  const int L = int(model.layers().size());
  // suffix[c]: the smallest value any node from c on reads.
  std::vector<int> suffix(std::size_t(L) + 1, std::numeric_limits<int>::max());
  for (int i = L - 1; i >= 0; --i) {
    int low = suffix[std::size_t(i) + 1];
    for (int v : model.inputs_of(std::size_t(i))) low = std::min(low, v);
    suffix[std::size_t(i)] = low;
  }
  std::vector<int> points;
  for (int c = 1; c < L; ++c)
    if (suffix[std::size_t(c)] >= c) points.push_back(c);
  return points;
}

double stage_cost(const Model& model, const StageCut& cut, int s) {
  double c = 0.0;
  for (int i = cut.begin(s); i < cut.end(s); ++i) c += model.node_cost(std::size_t(i));
  return c;
}

StageCut balanced_cut(const Model& model, int P) {
  std::vector<double> cost(model.layers().size());
  for (std::size_t i = 0; i < cost.size(); ++i) cost[i] = model.node_cost(i);
  return balanced_cut(model, cost, P);
}

StageCut balanced_cut(const Model& model, const std::vector<double>& node_costs, int P) {
  check(P >= 1, "--pp must be at least 1, got " + std::to_string(P));
  return balanced_cut(model, std::vector<std::vector<double>>(std::size_t(P), node_costs));
}

StageCut balanced_cut(const Model& model, const std::vector<std::vector<double>>& stage_node_costs) {
  const int L = int(model.layers().size());
  const int P = int(stage_node_costs.size());
  check(P >= 1, "--pp must be at least 1, got " + std::to_string(P));
  for (const auto& costs : stage_node_costs)
    check(int(costs.size()) == L, "pipeline: " + std::to_string(costs.size()) + " node costs for a model of " +
                                      std::to_string(L) + " nodes");
  const std::vector<int> points = chain_points(model);
  check(P - 1 <= int(points.size()), "--pp " + std::to_string(P) + ": " + model.name() + " has only " +
                                         std::to_string(points.size()) + " chain point(s) to cut at, so at most " +
                                         std::to_string(points.size() + 1) + " stages");
  // Cut candidates 0 = the start, points..., L = the end; prefix[s]: prefix sums of stage s's node costs.
  std::vector<int> at{0};
  at.insert(at.end(), points.begin(), points.end());
  at.push_back(L);
  std::vector<std::vector<double>> prefix(std::size_t(P), std::vector<double>(std::size_t(L) + 1, 0.0));
  for (int s = 0; s < P; ++s)
    for (int i = 0; i < L; ++i)
      prefix[std::size_t(s)][std::size_t(i) + 1] =
          prefix[std::size_t(s)][std::size_t(i)] + stage_node_costs[std::size_t(s)][std::size_t(i)];
  const int C = int(at.size());
  // best[k][j]: the smallest largest stage cost of stages 0..k-1 covering nodes [0, at[j]) (stage k-1 priced
  // by its own costs); from[k][j] the cut.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(std::size_t(P) + 1, std::vector<double>(std::size_t(C), inf));
  std::vector<std::vector<int>> from(std::size_t(P) + 1, std::vector<int>(std::size_t(C), -1));
  best[0][0] = 0.0;
  for (int k = 1; k <= P; ++k) {
    const std::vector<double>& pre = prefix[std::size_t(k) - 1];
    for (int j = 1; j < C; ++j)
      for (int i = 0; i < j; ++i) {
        if (best[std::size_t(k) - 1][std::size_t(i)] == inf) continue;
        const double c = std::max(best[std::size_t(k) - 1][std::size_t(i)],
                                  pre[std::size_t(at[std::size_t(j)])] - pre[std::size_t(at[std::size_t(i)])]);
        if (c < best[std::size_t(k)][std::size_t(j)]) {  // strict: ties keep the earliest cut
          best[std::size_t(k)][std::size_t(j)] = c;
          from[std::size_t(k)][std::size_t(j)] = i;
        }
      }
  }
  StageCut cut;
  cut.begins.assign(std::size_t(P) + 1, L);
  for (int k = P, j = C - 1; k > 0; --k) {
    j = from[std::size_t(k)][std::size_t(j)];
    cut.begins[std::size_t(k) - 1] = at[std::size_t(j)];
  }
  return cut;
}

StageCut parse_cut(const std::string& text, const Model& model, int P) {
  const int L = int(model.layers().size());
  const std::vector<int> points = chain_points(model);
  const std::string where = " (" + model.name() + "'s chain points: " + list_points(points) + ")";
  StageCut cut;
  cut.begins.push_back(0);
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int c = -1;
    try {
      c = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == item.size() && !item.empty(), "--pp-split '" + text + "': '" + item + "' is not a node index" + where);
    check(c > cut.begins.back() && c < L, "--pp-split '" + text + "': node " + std::to_string(c) +
                                              " does not start a later, non-empty stage (nodes 1-" +
                                              std::to_string(L - 1) + ", increasing)" + where);
    check(std::binary_search(points.begin(), points.end(), c),
          "--pp-split '" + text + "': node " + std::to_string(c) + " ('" + model.layers()[std::size_t(c)]->name() +
              "') is not a chain point: a value from before it is read after it" + where);
    cut.begins.push_back(c);
  }
  check(int(cut.begins.size()) == P, "--pp-split '" + text + "' gives " + std::to_string(cut.begins.size()) +
                                         " stage(s), --pp is " + std::to_string(P) + " (name P - 1 nodes)" + where);
  cut.begins.push_back(L);
  return cut;
}

StageCut stage_cut(const Model& model, int P, const std::string& split) {
  return split.empty() ? balanced_cut(model, P) : parse_cut(split, model, P);
}

namespace {
// "stage 0: nodes 0-11 (conv1 .. layer2.1.relu2), <share(s)>; stage 1: ...".
template <typename Share>
std::string describe_stages(const Model& model, const StageCut& cut, const Share& share) {
  std::string out;
  for (int s = 0; s < cut.stages(); ++s) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%sstage %d: nodes %d-%d (%s .. %s), ", s ? "; " : "", s, cut.begin(s),
                  cut.end(s) - 1, model.layers()[std::size_t(cut.begin(s))]->name().c_str(),
                  model.layers()[std::size_t(cut.end(s)) - 1]->name().c_str());
    out += buf + share(s);
  }
  return out;
}
std::string percent(double part, double total, const char* of) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f%% of %s", total > 0 ? 100.0 * part / total : 0.0, of);
  return buf;
}
}  // namespace

std::string describe_cut(const Model& model, const StageCut& cut) {
  double total = 0.0;
  for (int s = 0; s < cut.stages(); ++s) total += stage_cost(model, cut, s);
  return describe_stages(model, cut, [&](int s) { return percent(stage_cost(model, cut, s), total, "the cost"); });
}

std::vector<double> stage_sums(const StageCut& cut, const std::vector<std::vector<double>>& rows) {
  std::vector<double> sums(std::size_t(cut.stages()), 0.0);
  for (int s = 0; s < cut.stages(); ++s)
    for (int i = cut.begin(s); i < cut.end(s); ++i) sums[std::size_t(s)] += rows[std::size_t(s)][std::size_t(i)];
  return sums;
}

std::string describe_cut(const Model& model, const StageCut& cut, const std::vector<std::vector<double>>& seconds) {
  const std::vector<double> mine = stage_sums(cut, seconds);
  double total = 0.0;
  for (double t : mine) total += t;
  return describe_stages(model, cut, [&](int s) {
    char ms[64];
    std::snprintf(ms, sizeof ms, " (%.2f ms a micro-batch)", 1e3 * mine[std::size_t(s)]);
    return percent(mine[std::size_t(s)], total, "the measured time") + ms;
  });
}

StageCut map_cut(const Model& whole, const StageCut& cut, const Model& other) {
  const std::vector<int> points = chain_points(other);
  StageCut out;
  out.begins.push_back(0);
  for (int s = 1; s < cut.stages(); ++s) {
    const std::string& name = whole.layers()[std::size_t(cut.begin(s))]->name();
    int at = -1;
    for (std::size_t i = 0; i < other.layers().size() && at < 0; ++i)
      if (other.layers()[i]->name() == name) at = int(i);
    check(at > out.begins.back() && std::binary_search(points.begin(), points.end(), at),
          "pipeline: stage " + std::to_string(s) + " starts at '" + name +
              "', which is not a chain point of the model as built here (e.g. under --tp)");
    out.begins.push_back(at);
  }
  out.begins.push_back(int(other.layers().size()));
  return out;
}

std::unique_ptr<Model> take_stage(std::unique_ptr<Model> whole, const StageCut& cut, int s) {
  check(s >= 0 && s < cut.stages(), "pipeline: no stage " + std::to_string(s));
  return Model::cut(std::move(*whole), cut.begin(s), cut.end(s));
}

}  // namespace ringtrain::nn
