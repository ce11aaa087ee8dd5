#include "ringtrain/data/show.h"

#include <algorithm>

#include "ringtrain/core/error.h"

namespace ringtrain::data {

Image render_grid(const Split& split, const std::vector<GridCell>& cells, int columns, int zoom) {
  check(!cells.empty(), "show: no samples to draw");
  check(columns > 0 && zoom > 0 && zoom <= 32, "show: columns and zoom must be positive (zoom <= 32)");
  size_t caption_chars = 0;
  for (const GridCell& c : cells) {
    check(c.index >= 0 && c.index < split.count,
          "show: index " + std::to_string(c.index) + " is outside the " + std::to_string(split.count) + " samples");
    caption_chars = std::max(caption_chars, c.caption.size());
  }
  const int pad = 6, text_h = 10;
  const int cell_w = std::max(split.cols * zoom, Image::text_width(std::string(caption_chars, 'x'), 1)) + pad;
  const int cell_h = split.rows * zoom + text_h + pad;
  const int cols = std::min<int>(columns, int(cells.size()));
  const int rows = int((cells.size() + cols - 1) / cols);
  Image img(cols * cell_w + pad, rows * cell_h + pad, 255, 255, 255);
  for (size_t n = 0; n < cells.size(); ++n) {
    const int x0 = pad + int(n % cols) * cell_w, y0 = pad + int(n / cols) * cell_h;
    const uint8_t* px = split.image(cells[n].index);
    // Digits are white on black in MNIST-style files; draw them dark on light for print-like reading.
    for (int y = 0; y < split.rows; ++y)
      for (int x = 0; x < split.cols; ++x) {
        uint8_t v = uint8_t(255 - px[y * split.cols + x]);
        img.fill_rect(x0 + x * zoom, y0 + y * zoom, zoom, zoom, v, v, v);
      }
    const bool red = cells[n].highlight;
    img.text(x0, y0 + split.rows * zoom + 2, cells[n].caption, 1, red ? 200 : 0, 0, red ? 0 : 120);
  }
  return img;
}

}  // namespace ringtrain::data
