// Shared start-up for the multi-rank GoogleTest executables (tests/mpi/test_*.cpp, run by CTest under
// mpirun with 1-4 ranks). Each test file has its own main that calls run_mpi_tests(): MPI is
// initialised with MPI_THREAD_MULTIPLE, rank 0 prints GoogleTest's normal output, the other ranks print
// only their failures (prefixed with the rank), and every rank exits non-zero if any rank failed.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "ringtrain/dist/mpi_communicator.h"

namespace ringtrain::testing {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }

 private:
  int rank_;
};

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

inline int run_mpi_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 0;
  {
    dist::MpiSession mpi(&argc, &argv);
    int rank = world_rank();
    if (rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rank));
    }
    int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "another rank failed (see its output)\n");
    rc = any_failed;
  }
  return rc;
}

}  // namespace ringtrain::testing
