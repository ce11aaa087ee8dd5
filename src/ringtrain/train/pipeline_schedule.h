// Pipeline schedules (--pp-schedule): the order in which one stage runs the forward (F) and backward (B)
// passes of a step's M micro-batches. Both are synchronous (one optimizer step after every micro-batch's
// backward, the pipeline flushed at each step's end), so they compute the same gradients; they differ in
// how many micro-batches a stage holds between their forward and their backward.
//   gpipe  (Huang et al. 2019): every forward, then every backward. A stage holds all M micro-batches.
//   1f1b   (PipeDream-flush, Narayanan et al. 2021; Megatron-LM's default): stage s of P runs
//          min(P - s - 1, M) warm-up forwards, then alternates one forward and one backward, then the
//          remaining backwards. A stage holds at most P - s micro-batches (<= P).
// Backwards run in micro-batch order 0, 1, ..., M-1 in both, so each stage sums its gradients in the order
// the one-process --micro-batches run does (train/grad_accumulator.h): the same bits.
// With equal stage costs both idle for (P-1)/(M+P-1) of the step (the bubble, ideal_bubble()).
#pragma once
#include <string>
#include <vector>

namespace ringtrain::train {

enum class PipeSchedule { GPipe, OneFOneB };
// "gpipe" | "1f1b"; a one-line Error otherwise.
PipeSchedule parse_pp_schedule(const std::string& name);
const char* pp_schedule_name(PipeSchedule s);

struct PipeAction {
  bool forward;  // F, else B
  int micro;     // the micro-batch, 0..M-1
};
// Stage s's actions for one step.
std::vector<PipeAction> stage_actions(PipeSchedule schedule, int P, int s, int M);
// The most micro-batches the actions hold at once (forward done, backward not yet).
int max_in_flight(const std::vector<PipeAction>& actions);
// (P-1)/(M+P-1): the idle share of a step of equal stages.
double ideal_bubble(int P, int M);

}  // namespace ringtrain::train
