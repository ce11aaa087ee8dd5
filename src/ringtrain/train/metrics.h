// Metrics as JSON lines: one flat object a log step (numbers and strings only), written by rank 0 and
// flushed line by line so a crashed run keeps everything up to its last log step. The reader (for
// `ringtrain plot`) takes any line that is a flat JSON object.
#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::train {

// One record: ordered key -> value pairs; values are numbers or strings.
class MetricsRecord {
 public:
  MetricsRecord& set(const std::string& key, double value);
  MetricsRecord& set(const std::string& key, const std::string& value);
  std::string to_json() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON-encoded value
};

class MetricsWriter {
 public:
  // Empty path: a writer that writes nothing. Truncates an existing file.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  bool enabled() const { return file_ != nullptr; }
  void write(const MetricsRecord& record);  // throws Error naming the file if the write fails

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// A parsed line: numeric fields and string fields.
struct MetricsRow {
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
  bool has(const std::string& key) const { return numbers.count(key) > 0; }
};

// Reads a metrics file; throws Error("<path>:<line>: ...") on a line that is not a flat JSON object.
std::vector<MetricsRow> read_metrics(const std::string& path);

}  // namespace ringtrain::train
