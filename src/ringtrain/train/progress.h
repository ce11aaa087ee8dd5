// Progress of training on rank 0. On a terminal: a bar per epoch redrawn in place (step/total,
// samples/s, loss, ETA), ending with the epoch's summary line. Elsewhere (CI, logs): a plain line every
// log_every batches. quiet: only the epoch summaries.
#pragma once
#include <chrono>
#include <iosfwd>
#include <string>

namespace ringtrain::train {

class Progress {
 public:
  Progress(std::ostream& out, bool terminal, int log_every, bool quiet);
  // After each step; rate in samples/s (all ranks), loss averaged since the last report.
  void step(int epoch, int64_t batch, int64_t total, double loss, double rate);
  // At the end of an epoch: finishes the bar and prints the summary line.
  void epoch_done(const std::string& summary);
  void message(const std::string& line);  // a line that must not be drawn over

 private:
  void clear_bar();
  std::ostream& out_;
  bool terminal_, quiet_;
  int log_every_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{}, epoch_start_ = std::chrono::steady_clock::now();
  int64_t last_batch_ = 0;
};

// Whether standard output is a terminal (and TERM is not "dumb").
bool stdout_is_terminal();

}  // namespace ringtrain::train
