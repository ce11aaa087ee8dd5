// Learning-rate schedules (--lr-schedule). The rate is a pure function of the training position measured
// in epochs (epoch + fraction of the epoch's global sample order already trained on), so it does not depend
// on the number of ranks, the per-rank batch split or where a run was resumed: W ranks x batch B and one
// rank x batch W*B see the same rate at every step, and a resumed run continues on the same curve.
#pragma once
#include <string>

namespace ringtrain::optim {

struct LrSchedule {
  std::string kind = "constant";  // constant | linear | cosine | step
  double base_lr = 1e-3;          // the rate before the decay (the peak)
  double epochs = 10;             // length of the run, in epochs
  double decay_epochs = 0;        // the decay covers the last decay_epochs epochs (0: the whole run)
  double min_factor = 0.0;        // linear/cosine: the rate falls to base_lr * min_factor at the end;
                                  // step: the rate is base_lr * min_factor during the decay epochs
};

// Throws Error (one line naming the option) if the schedule is not valid.
void check_schedule(const LrSchedule& s);

// The rate for a step that starts at training position `position` (in epochs, 0 <= position < epochs).
// constant: base_lr. Before the decay window (position < epochs - decay_epochs): base_lr. Inside it, with
// t = (position - start) / decay_epochs in [0, 1): linear: base_lr * (1 - (1 - min_factor) * t);
// cosine: base_lr * (min_factor + (1 - min_factor) * (1 + cos(pi t)) / 2); step: base_lr * min_factor.
double scheduled_lr(const LrSchedule& s, double position);

}  // namespace ringtrain::optim
