#include "ringtrain/train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

namespace {

// "Nice" tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over [lo, hi].
double nice_step(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

std::string tick_label(double v, double step) {
  char buf[32];
  if (std::fabs(v) < 1e-6 * step) v = 0.0;  // no "-0.0" from rounding
  if (std::fabs(v) >= 1e5 || (step >= 1000 && std::fabs(v) >= 1000))
    std::snprintf(buf, sizeof buf, "%.0fk", v / 1000);
  else if (step >= 1)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (step >= 0.1)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (step >= 0.01)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

void draw_panel(Image& img, int x0, int y0, int w, int h, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<Series>& series, bool legend_at_bottom) {
  // Layout: title on top, y tick labels on the left, x tick labels and the x title below.
  const int left = 70, right = 15, top = 28, bottom = 45;
  const int px = x0 + left, py = y0 + top, pw = w - left - right, ph = h - top - bottom;
  img.text(x0 + (w - Image::text_width(title, 2)) / 2, y0 + 4, title, 2, 0, 0, 0);

  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Series& s : series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]), ymax = std::max(ymax, s.y[i]);
    }
  img.fill_rect(px, py, pw, ph, 250, 250, 250);
  if (!std::isfinite(xmin)) {
    img.text(px + 10, py + ph / 2, "no data", 2, 150, 150, 150);
    return;
  }
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) ymax = ymin + std::max(1e-6, std::fabs(ymin) * 0.1), ymin -= std::max(1e-6, std::fabs(ymin) * 0.1);
  const double ypad = 0.05 * (ymax - ymin);
  ymin -= ypad, ymax += ypad;
  auto sx = [&](double x) { return px + int(std::lround((x - xmin) / (xmax - xmin) * (pw - 1))); };
  auto sy = [&](double y) { return py + ph - 1 - int(std::lround((y - ymin) / (ymax - ymin) * (ph - 1))); };

  // Grid and tick labels.
  const double xs = nice_step(xmin, xmax, 6), ys = nice_step(ymin, ymax, 5);
  for (double v = std::ceil(xmin / xs) * xs; v <= xmax + 1e-9 * xs; v += xs) {
    img.line(sx(v), py, sx(v), py + ph - 1, 225, 225, 225);
    std::string t = tick_label(v, xs);
    img.text(sx(v) - Image::text_width(t, 1) / 2, py + ph + 5, t, 1, 60, 60, 60);
  }
  for (double v = std::ceil(ymin / ys) * ys; v <= ymax + 1e-9 * ys; v += ys) {
    img.line(px, sy(v), px + pw - 1, sy(v), 225, 225, 225);
    std::string t = tick_label(v, ys);
    img.text(px - 6 - Image::text_width(t, 1), sy(v) - 3, t, 1, 60, 60, 60);
  }
  // Frame and axis titles.
  img.line(px, py, px, py + ph - 1, 0, 0, 0);
  img.line(px, py + ph - 1, px + pw - 1, py + ph - 1, 0, 0, 0);
  img.text(px + (pw - Image::text_width(xlabel, 1)) / 2, py + ph + 22, xlabel, 1, 0, 0, 0);
  // The y title is written horizontally above the axis (the font cannot rotate).
  img.text(x0 + 4, py - 12, ylabel, 1, 0, 0, 0);

  // Series (two-pixel lines, a dot per point when there are few) and the legend.
  int legend_y = legend_at_bottom ? py + ph - 8 - 14 * int(series.size()) : py + 6;
  for (const Series& s : series) {
    int last_x = -1, last_y = -1;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const int x = sx(s.x[i]), y = sy(s.y[i]);
      if (last_x >= 0) {
        img.line(last_x, last_y, x, y, s.r, s.g, s.b);
        img.line(last_x, last_y + 1, x, y + 1, s.r, s.g, s.b);
      }
      if (s.x.size() <= 40) img.fill_rect(x - 2, y - 2, 5, 5, s.r, s.g, s.b);
      last_x = x, last_y = y;
    }
    const int lx = px + pw - 12 - Image::text_width(s.name, 1) - 22;
    img.fill_rect(lx - 4, legend_y - 3, Image::text_width(s.name, 1) + 30, 13, 255, 255, 255);
    img.fill_rect(lx, legend_y + 2, 16, 3, s.r, s.g, s.b);
    img.text(lx + 22, legend_y, s.name, 1, 0, 0, 0);
    legend_y += 14;
  }
}

Image plot_metrics(const std::vector<MetricsRow>& rows, const std::string& title) {
  Series loss{"training loss", {}, {}, 0, 90, 200}, rate{"samples/s", {}, {}, 0, 140, 60};
  Series acc{"test accuracy %", {}, {}, 200, 60, 0};
  for (const MetricsRow& r : rows) {
    if (!r.has("step")) continue;
    const double step = r.numbers.at("step");
    if (r.has("loss")) loss.x.push_back(step), loss.y.push_back(r.numbers.at("loss"));
    if (r.has("samples_per_s")) rate.x.push_back(step), rate.y.push_back(r.numbers.at("samples_per_s"));
    if (r.has("test_accuracy")) acc.x.push_back(step), acc.y.push_back(100 * r.numbers.at("test_accuracy"));
  }
  check(!loss.x.empty() || !acc.x.empty(), "plot: the metrics hold no training steps (no \"step\" with \"loss\")");
  const int w = 900, ph = 300;
  Image img(w, 40 + 3 * ph, 255, 255, 255);
  img.text((w - Image::text_width(title, 2)) / 2, 10, title, 2, 0, 0, 0);
  draw_panel(img, 0, 40, w, ph, "Training loss", "step", "loss", {loss});
  // Accuracy rises to the top right, so its legend goes to the bottom.
  draw_panel(img, 0, 40 + ph, w, ph, "Test accuracy (end of each epoch)", "step", "accuracy %", {acc}, true);
  draw_panel(img, 0, 40 + 2 * ph, w, ph, "Throughput", "step", "samples/s (all ranks)", {rate});
  return img;
}

}  // namespace ringtrain::train
