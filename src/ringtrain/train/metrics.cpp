// Metrics lines are written here (numbers formatted as ringtrain always has) and read back with
// nlohmann-json (Debian's nlohmann-json3-dev), which also escapes the strings written.
#include "ringtrain/train/metrics.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/core/json_error.h"

namespace ringtrain::train {

namespace {

// A JSON string literal: nlohmann's escaping (bytes that are not UTF-8 become U+FFFD, never an error).
std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One line as a flat object: numbers (true/false as 1/0), strings; null (a non-finite number) is left out.
MetricsRow parse_line(const std::string& line, const std::string& where) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not a metrics line (" + json_error_text(e) + ")");
  }
  check(object.is_object(), where + ": not a metrics line (not a JSON object)");
  MetricsRow row;
  for (const auto& [key, value] : object.items()) {
    if (value.is_boolean()) row.numbers[key] = value.get<bool>() ? 1.0 : 0.0;
    else if (value.is_number()) row.numbers[key] = value.get<double>();
    else if (value.is_string()) row.strings[key] = value.get<std::string>();
    else check(value.is_null(), where + ": not a metrics line (\"" + key + "\" holds " + value.type_name() + ")");
  }
  return row;
}

}  // namespace

MetricsRecord& MetricsRecord::set(const std::string& key, double value) {
  char buf[64];
  if (!std::isfinite(value))
    std::snprintf(buf, sizeof buf, "null");  // JSON has no inf/NaN
  else if (value == std::floor(value) && std::fabs(value) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", value);
  else
    std::snprintf(buf, sizeof buf, "%.9g", value);
  fields_.emplace_back(key, buf);
  return *this;
}

MetricsRecord& MetricsRecord::set(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, json_string(value));
  return *this;
}

std::string MetricsRecord::to_json() const {
  std::string out = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ", ";
    out += json_string(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  check(file_ != nullptr, path + ": cannot open the metrics file for writing");
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const MetricsRecord& record) {
  if (!file_) return;
  std::string line = record.to_json() + "\n";
  check(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0,
        path_ + ": cannot write metrics (disk full?)");
}

std::vector<MetricsRow> read_metrics(const std::string& path) {
  std::ifstream in(path);
  check(bool(in), path + ": cannot open the metrics file");
  std::vector<MetricsRow> rows;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    rows.push_back(parse_line(line, path + ":" + std::to_string(number)));
  }
  check(!rows.empty(), path + ": no metrics in the file");
  return rows;
}

}  // namespace ringtrain::train
