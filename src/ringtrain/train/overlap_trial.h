// --overlap auto (the default): whether to overlap the gradient all-reduces with backward is measured,
// not assumed. Overlap costs a test of the all-reduce in flight at every layer boundary and, on a rank
// with one core, can only move data while backward pauses; for a model whose backward is short next to
// its buckets' exchange (LeNet-5) that can lose to reducing everything after backward. Both modes give
// the same bits (the same buckets, each the same all-reduce), so switching is free for determinism: the
// trial runs a few steps each way and keeps the faster.
//
// Schedule (steps of this process): kWarmup steps with overlap on (first touches, connection set-up),
// then 2 kTrial steps alternating on and off (a drift of the machine's speed hits both alike); each rank takes the median step time of either window, the ranks agree
// on the slowest rank's medians (the step time is set by the slowest), and every rank keeps the mode
// with the lower one (ties: on). `on` and `off` skip the trial.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/dist/communicator.h"

namespace ringtrain::train {

enum class OverlapPolicy { Auto, On, Off };
// "auto" | "on" | "off"; throws Error naming --overlap otherwise.
OverlapPolicy parse_overlap(const std::string& name);

class OverlapTrial {
 public:
  static constexpr int kWarmup = 3, kTrial = 8;
  explicit OverlapTrial(OverlapPolicy policy) : policy_(policy) {}
  // Whether step k (counting this process's steps from 0) runs with overlap.
  bool overlap_at(int64_t k) const;
  // Records step k's wall time; after the trial's last step agrees over comm (collective: every rank
  // records the same steps) and returns true once, when the decision was just made.
  bool record(int64_t k, double step_seconds, dist::Communicator& comm);
  bool decided() const { return decided_; }
  // After the decision: the agreed medians (ms) and the mode kept.
  double on_ms() const { return on_ms_; }
  double off_ms() const { return off_ms_; }
  bool keep_overlap() const { return keep_; }
  std::string summary() const;  // one line for the log

 private:
  OverlapPolicy policy_;
  std::vector<double> on_, off_;
  bool decided_ = false, keep_ = true;
  double on_ms_ = 0, off_ms_ = 0;
};

}  // namespace ringtrain::train
