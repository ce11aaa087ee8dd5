#include "ringtrain/train/pipeline_schedule.h"

#include <algorithm>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

PipeSchedule parse_pp_schedule(const std::string& name) {
  if (name == "gpipe") return PipeSchedule::GPipe;
  if (name == "1f1b") return PipeSchedule::OneFOneB;
  throw Error("--pp-schedule must be gpipe or 1f1b, got '" + name + "'");
}

const char* pp_schedule_name(PipeSchedule s) { return s == PipeSchedule::GPipe ? "gpipe" : "1f1b"; }

std::vector<PipeAction> stage_actions(PipeSchedule schedule, int P, int s, int M) {
  check(P >= 1 && s >= 0 && s < P && M >= 1, "pipeline schedule: bad stage " + std::to_string(s) + " of " +
                                                  std::to_string(P) + " with " + std::to_string(M) + " micro-batches");
  std::vector<PipeAction> a;
  if (schedule == PipeSchedule::GPipe) {
    for (int m = 0; m < M; ++m) a.push_back({true, m});
    for (int m = 0; m < M; ++m) a.push_back({false, m});
    return a;
  }
  const int warmup = std::min(P - s - 1, M);
  int f = 0, b = 0;
  while (f < warmup) a.push_back({true, f++});
  while (f < M) {  // steady state: one forward, one backward
    a.push_back({true, f++});
    a.push_back({false, b++});
  }
  while (b < M) a.push_back({false, b++});
  return a;
}

int max_in_flight(const std::vector<PipeAction>& actions) {
  int held = 0, most = 0;
  for (const PipeAction& a : actions) {
    held += a.forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

double ideal_bubble(int P, int M) { return double(P - 1) / double(M + P - 1); }

}  // namespace ringtrain::train
