// The watchdog on real MPI collectives.
//  - As a CTest test (no arguments, 1-4 ranks): a collective that one rank joins late fires the watchdog
//    on the waiting ranks (with a recording action, so the job goes on and the collective completes).
//  - As the driver of tests/mpi/rank_failure.sh:  test_rank_failure --fault hang|exit|kill --timeout S
//    every rank runs all-reduces in a loop; at iteration 5 the last rank hangs, exits without
//    MPI_Finalize, or is killed by SIGKILL. The others must stop within the timeout, the whole job must end
//    non-zero, and (hang) the message must name the rank and the operation.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/dist/half_allreduce.h"
#include "ringtrain/dist/mpi_communicator.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

TEST(Watchdog, FiresOnALateRank) {
  const int W = world_size(), r = world_rank();
  if (W == 1) GTEST_SKIP() << "needs a peer to be late";
  std::mutex mu;
  std::vector<std::string> messages;
  MpiOptions opt;
  opt.timeout_s = 0.3;
  opt.on_timeout = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    messages.push_back(m);
  };
  for (AllreduceAlgorithm algo : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::Mpi}) {
    opt.algorithm = algo;
    messages.clear();
    MpiCommunicator comm(MPI_COMM_WORLD, opt);
    std::vector<float> x(1000, 1.0f);
    if (r == W - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    comm.allreduce_sum(x.data(), x.size());
    EXPECT_EQ(x[999], float(W));
    std::lock_guard<std::mutex> lock(mu);
    if (r == W - 1) {
      EXPECT_TRUE(messages.empty()) << "the late rank itself waited for nobody";
    } else {
      ASSERT_EQ(messages.size(), 1u) << "rank " << r << " waited 1.5 s with a 0.3 s timeout";
      EXPECT_NE(messages[0].find("rank " + std::to_string(r) + " of " + std::to_string(W)), std::string::npos)
          << messages[0];
      EXPECT_NE(messages[0].find(std::string("allreduce_sum(float x 1000, ") + allreduce_name(algo) + ")"),
                std::string::npos)
          << messages[0];
    }
  }
}

// The 16-bit gradient all-reduce (--grad-comm bf16) is guarded by the same watchdog.
TEST(Watchdog, GuardsTheHalfPrecisionAllreduce) {
  const int W = world_size(), r = world_rank();
  if (W == 1) GTEST_SKIP() << "needs a peer to be late";
  std::mutex mu;
  std::vector<std::string> messages;
  MpiOptions opt;
  opt.timeout_s = 0.3;
  opt.on_timeout = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    messages.push_back(m);
  };
  MpiCommunicator comm(MPI_COMM_WORLD, opt);
  HalfGradCommunicator half(comm, GradComm::Bf16);
  std::vector<float> x(1000, 1.0f);
  if (r == W - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  half.allreduce_sum(x.data(), x.size());
  EXPECT_EQ(x[0], float(W));
  std::lock_guard<std::mutex> lock(mu);
  if (r != W - 1) {
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_NE(messages[0].find("allreduce_sum(float x 1000, bf16)"), std::string::npos) << messages[0];
  }
}

int run_fault(const std::string& fault, double timeout_s) {
  MpiSession mpi(nullptr, nullptr);
  MpiOptions opt;
  opt.timeout_s = timeout_s;
  MpiCommunicator comm(MPI_COMM_WORLD, opt);
  const int W = comm.size(), r = comm.rank();
  std::vector<float> g(61706, 1.0f);
  for (int it = 0;; ++it) {
    if (it == 5 && r == W - 1) {
      std::fprintf(stderr, "rank %d: injecting fault '%s'\n", r, fault.c_str());
      std::fflush(stderr);
      if (fault == "hang") for (;;) pause();
      if (fault == "exit") std::_Exit(0);
      if (fault == "kill") raise(SIGKILL);
    }
    comm.allreduce_sum(g.data(), g.size());
    for (float& v : g) v /= float(W);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (it > 100000) return 1;
  }
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) {
  if (argc >= 5 && std::strcmp(argv[1], "--fault") == 0 && std::strcmp(argv[3], "--timeout") == 0) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rc = ringtrain::dist::run_fault(argv[2], std::atof(argv[4]));
    MPI_Finalize();
    return rc;
  }
  return ringtrain::testing::run_mpi_tests(argc, argv);
}
