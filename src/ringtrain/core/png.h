// Images a person can open: an RGB canvas with the few drawing operations the grids and plots need
// (image.cpp, with its bitmap font), encoded as PNG by libpng (png.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

// An 8-bit RGB canvas with the few drawing operations the grids and plots need.
class Image {
 public:
  Image(int width, int height, uint8_t r = 255, uint8_t g = 255, uint8_t b = 255);
  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, uint8_t r, uint8_t g, uint8_t b);  // ignores points outside
  void fill_rect(int x, int y, int w, int h, uint8_t r, uint8_t g, uint8_t b);
  void line(int x0, int y0, int x1, int y1, uint8_t r, uint8_t g, uint8_t b);
  // Text in a 5x7 pixel font (printable ASCII), scaled by `scale`; returns the width drawn.
  int text(int x, int y, const std::string& s, int scale, uint8_t r, uint8_t g, uint8_t b);
  static int text_width(const std::string& s, int scale) { return int(s.size()) * 6 * scale; }
  // Writes the canvas as an RGB PNG (atomically). Throws Error naming path.
  void write_png(const std::string& path) const;
  const std::vector<uint8_t>& rgb() const { return rgb_; }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

// Encodes width x height pixels (channels 1 = gray, 3 = RGB) as PNG bytes.
std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels);

}  // namespace ringtrain
