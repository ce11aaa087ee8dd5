// Renders dataset samples as an image grid a person can read: each digit scaled up, its label (and an
// optional second label, e.g. a prediction) written under it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/core/png.h"
#include "ringtrain/data/dataset.h"

namespace ringtrain::data {

struct GridCell {
  int64_t index;        // sample index in the split
  std::string caption;  // written under the digit, e.g. "#17 label 3" or "true 4 pred 9"
  bool highlight = false;  // drawn with a red caption (e.g. a mistake)
};

// Lays the cells out `columns` a row, each digit magnified `zoom` times. Throws Error for an index
// outside the split.
Image render_grid(const Split& split, const std::vector<GridCell>& cells, int columns = 8, int zoom = 4);

}  // namespace ringtrain::data
