#include "ringtrain/train/metrics.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if ((unsigned char)c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A parser for one flat JSON object: {"key": number | "string" | true | false | null, ...}.
class LineParser {
 public:
  LineParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}
  MetricsRow parse() {
    MetricsRow row;
    skip_space();
    expect('{');
    skip_space();
    if (peek() == '}') return ++pos_, finish(row);
    for (;;) {
      skip_space();
      std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (peek() == '"') {
        row.strings[key] = parse_string();
      } else if (s_.compare(pos_, 4, "true") == 0) {
        row.numbers[key] = 1, pos_ += 4;
      } else if (s_.compare(pos_, 5, "false") == 0) {
        row.numbers[key] = 0, pos_ += 5;
      } else if (s_.compare(pos_, 4, "null") == 0) {
        pos_ += 4;
      } else {
        const char* begin = s_.c_str() + pos_;
        char* end = nullptr;
        double v = std::strtod(begin, &end);
        if (end == begin) fail("expected a value for \"" + key + "\"");
        pos_ += std::size_t(end - begin);
        row.numbers[key] = v;
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return finish(row);
    }
  }

 private:
  MetricsRow finish(MetricsRow& row) {
    skip_space();
    if (pos_ != s_.size()) fail("text after the object");
    return row;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        char e = s_[pos_++];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        if (e == 'u') pos_ += 4, out.back() = '?';
      } else {
        out += c;
      }
    }
    expect('"');
    return out;
  }
  [[noreturn]] void fail(const std::string& what) {
    throw Error(where_ + ": not a metrics line (" + what + " at column " + std::to_string(pos_ + 1) + ")");
  }
  const std::string& s_;
  std::string where_;
  std::size_t pos_ = 0;
};

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
    rows.push_back(LineParser(line, path + ":" + std::to_string(number)).parse());
  }
  check(!rows.empty(), path + ": no metrics in the file");
  return rows;
}

}  // namespace ringtrain::train
