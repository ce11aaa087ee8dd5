// --allreduce auto's start-up: time every algorithm on the data-parallel communicator at a few sizes
// (the slowest rank's time per call, the median of a few repeats), fit each an alpha-beta line
// (allreduce_cost_model.h) - about 0.2-0.6 s - or read a calibration cached in a file
// (--allreduce-calibration FILE: read when it exists, else measured and written there).
//
// Every rank must choose the same algorithm for a bucket (they run it together), so the numbers are
// agreed: times are the max over ranks, and rank 0's model (its JSON text, which round-trips exactly)
// is broadcast and parsed by every rank. A file that is not a calibration, or one made for another
// world size or host split, is an error naming the file (on every rank), never silently replaced:
// delete it to measure again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/dist/allreduce_cost_model.h"
#include "ringtrain/dist/mpi_communicator.h"

namespace ringtrain::dist {

struct CalibrationOptions {
  // Ascending. Those up to always_bytes are always timed; a larger one only while the sizes timed are still
  // below largest_message_bytes (the largest bucket the plan will reduce: lenet5's never need it) and timing it
  // is predicted (from the size before it, scaled by the bytes) to keep the whole calibration within budget_s:
  // 16 MiB on shared memory (~0.3 s more at 4 ranks, where it shows MPI_Allreduce's own large-message
  // algorithm and which of ours extrapolate well), not over a 1 Gbit/s link (seconds). The decision uses the
  // agreed (slowest rank's) times, so every rank times the same sizes.
  std::vector<std::size_t> sizes_bytes = {std::size_t(4) << 10, std::size_t(32) << 10, std::size_t(256) << 10,
                                          std::size_t(2) << 20, std::size_t(16) << 20};
  std::size_t always_bytes = std::size_t(2) << 20;
  std::size_t largest_message_bytes = SIZE_MAX;
  double budget_s = 0.5;
  int repeats = 5;  // after one warm-up
};

// Collective over comm: times every concrete algorithm and fits the model; identical on every rank.
AllreduceCostModel calibrate_allreduce(MpiCommunicator& comm, const CalibrationOptions& opt = {});

struct Calibration {
  AllreduceCostModel model;
  std::string how;  // for the log: "calibrated in 0.21 s", "read from FILE", "calibrated in 0.21 s, written to FILE"
};
// Collective: path empty -> calibrate; path names a file -> read it (rank 0) and check it fits comm;
// path names no file -> calibrate and write it (rank 0). Throws Error naming the file on every rank.
Calibration load_or_calibrate(MpiCommunicator& comm, const std::string& path, const CalibrationOptions& opt = {});

// Every rank gets rank 0's model (through its JSON text).
AllreduceCostModel agree_on_model(Communicator& comm, const AllreduceCostModel& mine);

}  // namespace ringtrain::dist
