// --allreduce auto's start-up on real ranks: the calibration gives every rank the same model (the
// choice must agree), a calibration file is written when absent and read back identically when present,
// and a corrupt or mismatched file is an error naming it, on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "mpi_gtest.h"
#include "ringtrain/core/error.h"
#include "ringtrain/dist/allreduce_calibration.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

MpiOptions auto_options() {
  MpiOptions opt;
  opt.algorithm = AllreduceAlgorithm::Auto;
  opt.timeout_s = 60;
  return opt;
}

// Per world size: CTest may run the 1-4 rank runs at once.
std::string file_for(const std::string& what) {
  return std::string(RINGTRAIN_BINARY_DIR) + "/allreduce_calibration_np" + std::to_string(world_size()) + "_" + what + ".json";
}

void write_on_rank0(const std::string& path, const std::string& text) {
  if (world_rank() == 0) std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  MPI_Barrier(MPI_COMM_WORLD);
}

void expect_same_text_on_all_ranks(const std::string& mine) {
  std::string root = mine;
  uint64_t len = root.size();
  MPI_Bcast(&len, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  root.resize(len);
  MPI_Bcast(root.data(), int(len), MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_EQ(root, mine) << "rank " << world_rank() << " has another model";
}

TEST(Calibration, MeasuresEveryAlgorithmAndAgrees) {
  MpiCommunicator comm(MPI_COMM_WORLD, auto_options());
  const auto t0 = std::chrono::steady_clock::now();
  const AllreduceCostModel m = calibrate_allreduce(comm);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world_rank() == 0) std::printf("calibration on %d rank(s): %.3f s\n", world_size(), took);
  EXPECT_EQ(m.world_size, world_size());
  EXPECT_EQ(m.hosts, 1);
  // 2 MiB always; 16 MiB when the budget allows it here (timing-dependent, the same on every rank).
  EXPECT_TRUE(m.max_bytes == std::size_t(2) << 20 || m.max_bytes == std::size_t(16) << 20) << m.max_bytes;
  EXPECT_EQ(m.lines.size(), concrete_allreduce_algorithms().size());
  expect_same_text_on_all_ranks(m.to_json());
  for (std::size_t bytes : {std::size_t(4096), std::size_t(1) << 26}) {
    int mine = int(m.choose(bytes)), root = mine;
    MPI_Bcast(&root, 1, MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(mine, root) << bytes << " bytes";
  }
}

// The sizes above always_bytes are timed only within the budget: none with no budget, all with plenty.
TEST(Calibration, LargeSizesOnlyWithinTheBudget) {
  MpiCommunicator comm(MPI_COMM_WORLD, auto_options());
  CalibrationOptions o;
  o.sizes_bytes = {std::size_t(4) << 10, std::size_t(64) << 10, std::size_t(1) << 20};
  o.always_bytes = std::size_t(64) << 10;
  o.repeats = 1;
  o.budget_s = 0.0;
  const AllreduceCostModel none = calibrate_allreduce(comm, o);
  EXPECT_EQ(none.max_bytes, std::size_t(64) << 10);
  o.budget_s = 1e9;
  const AllreduceCostModel all = calibrate_allreduce(comm, o);
  EXPECT_EQ(all.max_bytes, std::size_t(1) << 20);
  expect_same_text_on_all_ranks(all.to_json());
  o.largest_message_bytes = std::size_t(32) << 10;  // covered by 64 KiB: nothing larger is timed
  EXPECT_EQ(calibrate_allreduce(comm, o).max_bytes, std::size_t(64) << 10);
  o.sizes_bytes = {std::size_t(64) << 10, std::size_t(4) << 10};
  std::string e;
  try {
    calibrate_allreduce(comm, o);
  } catch (const Error& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("ascending"), std::string::npos) << e;
}

TEST(Calibration, FileIsWrittenThenRead) {
  MpiCommunicator comm(MPI_COMM_WORLD, auto_options());
  const std::string path = file_for("cache");
  if (world_rank() == 0) std::remove(path.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  const Calibration first = load_or_calibrate(comm, path);
  EXPECT_NE(first.how.find("written to " + path), std::string::npos) << first.how;
  const Calibration second = load_or_calibrate(comm, path);
  EXPECT_EQ(second.how, "read from " + path);
  EXPECT_EQ(second.model.to_json(), first.model.to_json());
  expect_same_text_on_all_ranks(second.model.to_json());
  const Calibration none = load_or_calibrate(comm, "");
  EXPECT_EQ(none.how.rfind("calibrated in ", 0), 0u) << none.how;
}

void expect_error_on_every_rank(MpiCommunicator& comm, const std::string& path, const std::string& want) {
  try {
    load_or_calibrate(comm, path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(want), std::string::npos) << what;
  }
}

TEST(Calibration, CorruptOrMismatchedFileIsAnError) {
  MpiCommunicator comm(MPI_COMM_WORLD, auto_options());
  const std::string corrupt = file_for("corrupt");
  write_on_rank0(corrupt, "{\"format\": \"ringtrain-allreduce-calibration\", \"version\": 1, \"world_si");
  expect_error_on_every_rank(comm, corrupt, "not an all-reduce calibration");
  AllreduceCostModel other;
  other.world_size = world_size() + 1;
  other.hosts = 1;
  other.lines[AllreduceAlgorithm::Ring] = {1e-5, 1e-10};
  const std::string mismatched = file_for("mismatched");
  write_on_rank0(mismatched, other.to_json());
  expect_error_on_every_rank(comm, mismatched, "calibration for " + std::to_string(world_size() + 1) + " rank(s)");
  if (world_rank() == 0) std::remove(corrupt.c_str()), std::remove(mismatched.c_str());
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
