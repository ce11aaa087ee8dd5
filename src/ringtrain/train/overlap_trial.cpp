#include "ringtrain/train/overlap_trial.h"

#include <algorithm>
#include <cstdio>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

OverlapPolicy parse_overlap(const std::string& name) {
  if (name == "auto") return OverlapPolicy::Auto;
  if (name == "on") return OverlapPolicy::On;
  if (name == "off") return OverlapPolicy::Off;
  throw Error("--overlap must be auto, on or off, got '" + name + "'");
}

bool OverlapTrial::overlap_at(int64_t k) const {
  if (policy_ != OverlapPolicy::Auto) return policy_ == OverlapPolicy::On;
  if (decided_) return keep_;
  // Warm-up on; then on and off alternate, so a drift of the machine's speed hits both alike.
  return k < kWarmup || (k - kWarmup) % 2 == 0;
}

bool OverlapTrial::record(int64_t k, double step_seconds, dist::Communicator& comm) {
  if (policy_ != OverlapPolicy::Auto || decided_ || k < kWarmup) return false;
  ((k - kWarmup) % 2 == 0 ? on_ : off_).push_back(step_seconds);
  if (k + 1 < kWarmup + 2 * kTrial) return false;
  // The slowest rank's medians: each rank writes its own into its slot of a zeroed vector, the sum
  // gathers them all, and everyone takes the same maximum.
  std::vector<double> medians(2 * std::size_t(comm.size()), 0.0);
  medians[2 * std::size_t(comm.rank())] = median(on_);
  medians[2 * std::size_t(comm.rank()) + 1] = median(off_);
  comm.allreduce_sum(medians.data(), medians.size());
  double on = 0, off = 0;
  for (int r = 0; r < comm.size(); ++r) {
    on = std::max(on, medians[2 * std::size_t(r)]);
    off = std::max(off, medians[2 * std::size_t(r) + 1]);
  }
  on_ms_ = 1e3 * on;
  off_ms_ = 1e3 * off;
  keep_ = on <= off;
  decided_ = true;
  return true;
}

std::string OverlapTrial::summary() const {
  char line[200];
  std::snprintf(line, sizeof line,
                "overlap auto: %.3f ms/step with overlap, %.3f ms/step without (medians of %d steps each, slowest "
                "rank): %s",
                on_ms_, off_ms_, kTrial, keep_ ? "overlap kept" : "gradients reduced after backward from now on");
  return line;
}

}  // namespace ringtrain::train
