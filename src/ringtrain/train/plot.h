// `ringtrain plot`: training curves from a metrics file as a PNG a person can read: training loss,
// test accuracy and throughput, each a panel with axes, tick labels, axis titles and a legend.
#pragma once
#include <string>
#include <vector>

#include "ringtrain/core/png.h"
#include "ringtrain/train/metrics.h"

namespace ringtrain::train {

struct Series {
  std::string name;
  std::vector<double> x, y;
  uint8_t r = 0, g = 90, b = 200;
};

// Draws one panel (frame, ticks, labels, series, legend) into img at (x0, y0) with size w x h.
void draw_panel(Image& img, int x0, int y0, int w, int h, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<Series>& series, bool legend_at_bottom = false);

// The three-panel figure of a run's metrics. Throws Error if the metrics hold no training steps.
Image plot_metrics(const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace ringtrain::train
