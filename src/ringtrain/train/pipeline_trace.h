// --pp-trace FILE: the last few training steps of every stage of a pipeline as one Chrome trace (JSON
// "traceEvents", opened by chrome://tracing or ui.perfetto.dev): a row a stage, its forward (F3) and backward
// (B3) passes on one track and its waits for messages on another, on the steady clock all processes of a
// host share (across hosts the stages' clocks are not aligned). What the bubble figure sums, laid out in
// time: the fill and drain waits the schedule implies, and any wait a slower neighbour or a late message adds.
#pragma once
#include <string>
#include <vector>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/train/pipeline_engine.h"

namespace ringtrain::train {

// Collective over the pipeline group: every stage's events, on every stage.
std::vector<PipeEvent> gather_pipe_events(const std::vector<PipeEvent>& mine, dist::Communicator& pp);
// Writes the events as a Chrome trace (times relative to the earliest event, in microseconds). Throws a
// one-line Error naming the file when it cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<PipeEvent>& events);

}  // namespace ringtrain::train
