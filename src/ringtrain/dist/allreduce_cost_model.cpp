#include "ringtrain/dist/allreduce_cost_model.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/core/json_error.h"
#include "ringtrain/dist/grad_reducer.h"

namespace ringtrain::dist {

namespace {
constexpr const char* kFormat = "ringtrain-allreduce-calibration";
constexpr int kVersion = 1;
}  // namespace

AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  check(bytes.size() == seconds.size() && !bytes.empty(), "alpha-beta fit: no timings");
  // Minimise sum_i (alpha a_i + beta b_i - 1)^2 with a_i = 1/t_i, b_i = n_i/t_i (relative error).
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double a = 1.0 / seconds[i], b = bytes[i] / seconds[i];
    saa += a * a, sab += a * b, sbb += b * b, sa += a, sb += b;
  }
  const double det = saa * sbb - sab * sab;
  AlphaBeta f;
  if (det > 0) {
    f.alpha_s = (sa * sbb - sb * sab) / det;
    f.beta_s_per_byte = (saa * sb - sab * sa) / det;
  }
  // A negative term (noise): refit the other alone.
  if (det <= 0 || f.alpha_s < 0) f = {0, sbb > 0 ? sb / sbb : 0};
  if (f.beta_s_per_byte < 0) f = {saa > 0 ? sa / saa : 0, 0};
  return f;
}

double AllreduceCostModel::predict(AllreduceAlgorithm a, std::size_t bytes) const {
  const auto it = lines.find(a);
  check(it != lines.end(), std::string("all-reduce cost model: no line for ") + allreduce_name(a));
  return it->second.alpha_s + it->second.beta_s_per_byte * double(bytes);
}

AllreduceAlgorithm AllreduceCostModel::choose(std::size_t bytes) const {
  const bool beyond = bytes > max_bytes && lines.size() > lines.count(AllreduceAlgorithm::Mpi);
  AllreduceAlgorithm best = AllreduceAlgorithm::Ring;
  double best_t = INFINITY;
  for (AllreduceAlgorithm a : concrete_allreduce_algorithms()) {
    if (!lines.count(a) || (beyond && a == AllreduceAlgorithm::Mpi)) continue;
    const double t = predict(a, bytes);
    if (t < best_t) best = a, best_t = t;
  }
  return best;
}

std::string AllreduceCostModel::to_json() const {
  nlohmann::json doc = {{"format", kFormat}, {"version", kVersion}, {"world_size", world_size}, {"hosts", hosts},
                         {"max_bytes", max_bytes}};
  nlohmann::json algos = nlohmann::json::object();
  for (const auto& [a, f] : lines) algos[allreduce_name(a)] = {{"alpha_s", f.alpha_s}, {"beta_s_per_byte", f.beta_s_per_byte}};
  doc["algorithms"] = algos;
  return doc.dump();  // doubles in their shortest exact form: they read back to the same bits
}

AllreduceCostModel AllreduceCostModel::from_json(const std::string& text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not an all-reduce calibration (not JSON: " + json_error_text(e) + ")");
  }
  const std::string bad = source + ": not an all-reduce calibration";
  check(doc.is_object() && doc.value("format", std::string()) == kFormat, bad + " (no \"format\": \"" + kFormat + "\")");
  check(doc.value("version", 0) == kVersion, bad + " (version " + doc.value("version", nlohmann::json()).dump() +
                                                 ", this ringtrain reads " + std::to_string(kVersion) + ")");
  AllreduceCostModel m;
  try {
    m.world_size = doc.at("world_size").get<int>();
    m.hosts = doc.at("hosts").get<int>();
    m.max_bytes = doc.at("max_bytes").get<std::size_t>();
    for (const auto& [name, f] : doc.at("algorithms").items()) {
      AllreduceAlgorithm a = parse_allreduce(name);
      check(a != AllreduceAlgorithm::Auto, bad + " (a line for \"auto\")");
      AlphaBeta ab{f.at("alpha_s").get<double>(), f.at("beta_s_per_byte").get<double>()};
      check(std::isfinite(ab.alpha_s) && std::isfinite(ab.beta_s_per_byte) && ab.alpha_s >= 0 && ab.beta_s_per_byte >= 0,
            bad + " (" + name + ": alpha and beta must be finite and >= 0)");
      m.lines[a] = ab;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(bad + " (" + json_error_text(e) + ")");
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind(source, 0) == 0 ? what : bad + " (" + what + ")");
  }
  check(m.world_size >= 1 && m.hosts >= 1 && !m.lines.empty(), bad + " (no world size, hosts or algorithms)");
  return m;
}

std::vector<AllreduceAlgorithm> plan_buckets(const AllreduceCostModel& model, const std::vector<Bucket>& buckets) {
  std::vector<AllreduceAlgorithm> plan;
  for (const Bucket& b : buckets) plan.push_back(model.choose(b.count * sizeof(float)));
  return plan;
}

std::string plan_text(const AllreduceCostModel& model, const std::vector<Bucket>& buckets, std::size_t bucket_bytes) {
  std::string s = "bucket-kb " + std::to_string(bucket_bytes >> 10) + ":";
  const std::vector<AllreduceAlgorithm> plan = plan_buckets(model, buckets);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    char kib[32];
    std::snprintf(kib, sizeof kib, "%.1f", double(buckets[b].count * sizeof(float)) / 1024.0);
    s += (b ? ", " : " ") + std::to_string(b) + " " + allreduce_name(plan[b]) + " (" + kib + " KiB)";
  }
  return s;
}

}  // namespace ringtrain::dist
