// --allreduce auto's cost model: per algorithm, an alpha-beta (latency-bandwidth) line
// t(bytes) = alpha + beta * bytes, fitted to timings on the data-parallel communicator itself
// (allreduce_calibration.h), so it captures this machine and this world size, MPI_Allreduce included.
// choose() takes the cheapest line at a message's size. The model is plain numbers that round-trip
// exactly through JSON, so a model read back (a calibration file, a checkpoint's metadata) makes the
// same choices as the one written: the choice decides the order of the additions, hence the bits.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ringtrain/dist/allreduce_algorithm.h"

namespace ringtrain::dist {

struct Bucket;

struct AlphaBeta {
  double alpha_s = 0;          // seconds per call
  double beta_s_per_byte = 0;  // seconds per byte of the buffer
};

// The line through (bytes_i, seconds_i) with the least squared *relative* error (a small message's 20 us
// counts as much as a large one's 20 ms); alpha and beta clamped to >= 0.
AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds);

struct AllreduceCostModel {
  int world_size = 0;  // what it was measured on; 0: not calibrated
  int hosts = 0;
  // The largest size timed. Above it MPI_Allreduce's line is not trusted: the library switches algorithms
  // inside at thresholds the calibration never saw (Open MPI 4.1 here: level with the ring up to 16 MiB,
  // then 1.6-2.3x its time at 64 MiB, docs/BENCHMARKS.md), while ours do the same steps at any size.
  std::size_t max_bytes = 0;
  std::map<AllreduceAlgorithm, AlphaBeta> lines;

  bool empty() const { return lines.empty(); }
  double predict(AllreduceAlgorithm a, std::size_t bytes) const;
  // The cheapest algorithm at this size (ties: concrete_allreduce_algorithms() order), leaving out mpi
  // above max_bytes when another line remains. Ring when empty.
  AllreduceAlgorithm choose(std::size_t bytes) const;

  std::string to_json() const;
  // Throws Error "<source>: ..." for text that is not such a model.
  static AllreduceCostModel from_json(const std::string& text, const std::string& source);
};

// The algorithm of each gradient bucket (fp32), in bucket order.
std::vector<AllreduceAlgorithm> plan_buckets(const AllreduceCostModel& model, const std::vector<Bucket>& buckets);
// One line for the log and the checkpoint's trainer.allreduce_plan:
// "bucket-kb 128: 0 ring (241.0 KiB), 1 rd (10.0 KiB)".
std::string plan_text(const AllreduceCostModel& model, const std::vector<Bucket>& buckets, std::size_t bucket_bytes);

}  // namespace ringtrain::dist
