// Recursive doubling, halving-doubling and the hierarchical all-reduce against their own fixed-order
// reference sums, computed on every rank from every rank's (deterministic) input, bit for bit: for the
// world sizes CTest runs (1-8 ranks), lengths 0, 1, 2, W-1, W+1, small and large primes (65537, or 10007
// above 4 ranks) and 196613 up to 4 ranks (several 512 KiB messages a step), so halves and chunks are
// uneven or empty, fp32 / fp64 / int64, driven to completion by finish() and by
// progress() polling, and through MpiCommunicator (blocking, non-blocking, auto with a given model).
//
// The references (each algorithm's header says why this is its order):
//   rd, hd: the power-of-two fold (x_{2j} + x_{2j+1} for j < rem), then the pairwise tree over the p
//           participants (aligned groups of 2^k joined lower + upper, k = 0, 1, ...);
//   hier:   per host, ranks l >= C folded into l mod C in order, the left fold around the host's ring
//           from the chunk's owner c, then the rd/hd tree over the hosts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/halving_doubling.h"
#include "ringtrain/dist/hierarchical_allreduce.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/power_of_two_fold.h"
#include "ringtrain/dist/recursive_doubling.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

template <typename T>
std::vector<T> input(int r, std::size_t n) {
  Rng rng(7000 + uint64_t(r));
  std::vector<T> x(n);
  for (auto& v : x) {
    if constexpr (std::is_integral_v<T>) v = T(int64_t(rng.next_u64() >> 24) - (int64_t(1) << 39));
    else v = T(rng.uniform(-1.0f, 1.0f)) * T(std::ldexp(1.0, int(rng.below(20)) - 10));  // order matters
  }
  return x;
}

// rd's and hd's order over values v[0..W-1].
template <typename T>
T pairwise_tree(const std::vector<T>& v) {
  const int W = int(v.size());
  const PowerOfTwoFold f(W);
  std::vector<T> u(std::size_t(f.p));
  for (int j = 0; j < f.p; ++j) u[j] = j < f.rem ? T(v[2 * j] + v[2 * j + 1]) : v[j + f.rem];
  for (int mask = 1; mask < f.p; mask <<= 1)
    for (int j = 0; j < f.p; j += 2 * mask) u[j] = T(u[j] + u[j + mask]);
  return u[0];
}

// hier's order; ranks_per_host 0: one host.
template <typename T>
T hierarchical_order(const std::vector<T>& v, std::size_t n, std::size_t i, int ranks_per_host) {
  const int W = int(v.size()), k = ranks_per_host > 0 ? ranks_per_host : W, H = (W + k - 1) / k;
  int C = k;
  for (int h = 0; h < H; ++h) C = std::min(C, std::min(k, W - h * k));
  const int c = ring_fold_start(n, C, i);
  std::vector<T> z;
  for (int h = 0; h < H; ++h) {
    const int L = std::min(k, W - h * k);
    std::vector<T> y(static_cast<std::size_t>(C));
    for (int l = 0; l < C; ++l) {
      y[l] = v[h * k + l];
      for (int e = l + C; e < L; e += C) y[l] = T(y[l] + v[h * k + e]);
    }
    T fold = y[c];
    for (int j = 1; j < C; ++j) fold = T(fold + y[(c + j) % C]);
    z.push_back(fold);
  }
  return pairwise_tree(z);
}

enum class Algo { Rd, Hd, Hier0, Hier1, Hier2, Hier3 };
const char* name(Algo a) {
  switch (a) {
    case Algo::Rd: return "rd";
    case Algo::Hd: return "hd";
    case Algo::Hier0: return "hier (shared-memory hosts)";
    case Algo::Hier1: return "hier (1 rank a host)";
    case Algo::Hier2: return "hier (2 ranks a host)";
    case Algo::Hier3: return "hier (3 ranks a host)";
  }
  return "?";
}
int ranks_per_host(Algo a) { return a == Algo::Hier1 ? 1 : a == Algo::Hier2 ? 2 : a == Algo::Hier3 ? 3 : 0; }

template <typename T>
void expect_reference(const std::vector<T>& got, std::size_t n, Algo a) {
  const int W = world_size();
  std::vector<std::vector<T>> xs;
  for (int r = 0; r < W; ++r) xs.push_back(input<T>(r, n));
  std::size_t bad = 0;
  std::vector<T> v(static_cast<std::size_t>(W));
  for (std::size_t i = 0; i < n; ++i) {
    for (int r = 0; r < W; ++r) v[r] = xs[r][i];
    const T want = a == Algo::Rd || a == Algo::Hd ? pairwise_tree(v) : hierarchical_order(v, n, i, ranks_per_host(a));
    if (std::memcmp(&got[i], &want, sizeof(T)) != 0 && bad++ < 5)
      ADD_FAILURE() << name(a) << " i=" << i << " got " << got[i] << " fixed-order reference " << want;
  }
  EXPECT_EQ(bad, 0u) << "of " << n << " elements";
}

std::vector<std::size_t> lengths() {
  const std::size_t W = std::size_t(world_size());
  std::vector<std::size_t> n = {0, 1, 2, W - 1, W + 1, 13, 4099, W <= 4 ? 65537u : 10007u};  // 5-8 ranks share 2 cores
  // A step's range moves in 512 KiB messages (step_schedule.cpp): 196613 elements are several of them
  // (2 in fp32, 3 in fp64 and int64) with a short last one, at up to 2 ranks (halves and quarters at 3-4).
  if (W <= 4) n.push_back(196613);
  return n;
}

std::unique_ptr<ScheduledAllreduce> make(Algo a, MPI_Comm comm) {
  if (a == Algo::Rd) return std::make_unique<RecursiveDoublingAllreduce>(comm);
  if (a == Algo::Hd) return std::make_unique<HalvingDoublingAllreduce>(comm);
  return std::make_unique<HierarchicalAllreduce>(comm, ranks_per_host(a));
}

enum class Drive { Finish, Poll, PollThenFinish };

template <typename T>
void check(Algo a, Drive drive) {
  const int r = world_rank();
  auto algo = make(a, MPI_COMM_WORLD);
  for (std::size_t n : lengths()) {
    SCOPED_TRACE(std::string(name(a)) + " n=" + std::to_string(n) + " W=" + std::to_string(world_size()) +
                 " drive=" + std::to_string(int(drive)));
    for (int repeat = 0; repeat < 2; ++repeat) {  // scratch and the object are reused
      std::vector<T> x = input<T>(r, n);
      algo->start(x.data(), n);
      if (drive == Drive::Finish) {
        algo->finish();
      } else if (drive == Drive::Poll) {
        while (!algo->progress()) {
        }
      } else {
        for (int i = 0; i <= r; ++i) algo->progress();  // a different amount of work on each rank first
        algo->finish();
      }
      EXPECT_FALSE(algo->active());
      EXPECT_TRUE(algo->progress()) << "complete stays complete";
      expect_reference(x, n, a);
    }
  }
}

class Algorithms : public ::testing::TestWithParam<Algo> {};
std::string test_name(Algo a) {
  static const char* const names[] = {"rd", "hd", "hier_shared", "hier_1", "hier_2", "hier_3"};
  return names[int(a)];
}

TEST_P(Algorithms, Fp32Finish) { check<float>(GetParam(), Drive::Finish); }
TEST_P(Algorithms, Fp32Poll) { check<float>(GetParam(), Drive::Poll); }
TEST_P(Algorithms, Fp32PollThenFinish) { check<float>(GetParam(), Drive::PollThenFinish); }
TEST_P(Algorithms, Fp64Finish) { check<double>(GetParam(), Drive::Finish); }
TEST_P(Algorithms, Fp64Poll) { check<double>(GetParam(), Drive::Poll); }
TEST_P(Algorithms, Int64Finish) { check<int64_t>(GetParam(), Drive::Finish); }

INSTANTIATE_TEST_SUITE_P(All, Algorithms,
                         ::testing::Values(Algo::Rd, Algo::Hd, Algo::Hier0, Algo::Hier1, Algo::Hier2, Algo::Hier3),
                         [](const auto& info) { return test_name(info.param); });

TEST(Algorithms, HierarchicalSplitsHosts) {
  const int W = world_size();
  HierarchicalAllreduce shared(MPI_COMM_WORLD);
  EXPECT_EQ(shared.hosts(), 1) << "every test rank runs on this machine";
  EXPECT_EQ(shared.slices(), W);
  HierarchicalAllreduce by2(MPI_COMM_WORLD, 2);
  EXPECT_EQ(by2.hosts(), (W + 1) / 2);
  EXPECT_EQ(by2.slices(), W == 1 || W % 2 ? 1 : 2);  // the smallest host
}

TEST(Algorithms, ASecondStartWhileActiveIsRefused) {
  if (world_size() == 1) GTEST_SKIP() << "one rank: nothing is ever in flight";
  HalvingDoublingAllreduce hd(MPI_COMM_WORLD);
  std::vector<float> x(1000, 1.0f), y(1000, 1.0f);
  hd.start(x.data(), x.size());
  EXPECT_THROW(hd.start(y.data(), y.size()), Error);
  hd.finish();
  for (float v : x) ASSERT_EQ(v, float(world_size()));
}

// Through the communicator, as the trainer uses it: each --allreduce choice, blocking and non-blocking.
MpiOptions options(AllreduceAlgorithm a, int ranks_per_host = 0) {
  MpiOptions opt;
  opt.algorithm = a;
  opt.timeout_s = 60;
  opt.ranks_per_host = ranks_per_host;
  return opt;
}

Algo algo_of(AllreduceAlgorithm a, int ranks_per_host) {
  if (a == AllreduceAlgorithm::RecursiveDoubling) return Algo::Rd;
  if (a == AllreduceAlgorithm::HalvingDoubling) return Algo::Hd;
  return ranks_per_host == 2 ? Algo::Hier2 : Algo::Hier0;
}

TEST(Communicator, EveryAlgorithmBlockingAndNonBlocking) {
  const int r = world_rank();
  for (auto a : {AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::Hierarchical})
    for (int k : {0, 2}) {
      MpiCommunicator comm(MPI_COMM_WORLD, options(a, k));
      EXPECT_EQ(comm.algorithm_for(1000), a);
      for (std::size_t n : lengths()) {
        SCOPED_TRACE(std::string(allreduce_name(a)) + " n=" + std::to_string(n) + " ranks_per_host=" + std::to_string(k));
        std::vector<float> x = input<float>(r, n), y = input<float>(r, n);
        std::vector<double> d = input<double>(r, n);
        std::vector<int64_t> i = input<int64_t>(r, n);
        comm.allreduce_sum(x.data(), n);
        comm.allreduce_sum(d.data(), n);
        comm.allreduce_sum(i.data(), n);
        comm.start_allreduce_sum(y.data(), n);
        while (!comm.test_allreduce()) {
        }
        comm.wait_allreduce();
        expect_reference(x, n, algo_of(a, k));
        expect_reference(d, n, algo_of(a, k));
        expect_reference(i, n, algo_of(a, k));
        EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0) << "blocking and non-blocking differ";
      }
    }
}

// traffic(): the bytes our algorithms post, as their schedules say. Summed over the ranks, a ring sum of n
// floats sends every chunk W-1 times in each phase: 2 (W-1) n x 4 bytes, for any W and n; halving-doubling
// at a power of two sends the same (each pair splits its range in two, log2 W times, then gathers back);
// recursive doubling sends the whole buffer log2 W times from every rank. MPI_Allreduce's sums are counted,
// not their bytes.
TEST(Communicator, TrafficCountsWhatEachAlgorithmSends) {
  const int W = world_size();
  const bool power_of_two = (W & (W - 1)) == 0;
  const std::size_t n = 10007;
  std::vector<float> x(n, 1.0f);
  auto sent_by_all = [&](const MpiCommunicator& comm) {
    double sent = double(comm.traffic().bytes_sent);
    MpiCommunicator sum(MPI_COMM_WORLD, options(AllreduceAlgorithm::Mpi));
    sum.allreduce_sum(&sent, 1);
    return sent;
  };
  const double ring_total = 2.0 * (W - 1) * double(n) * sizeof(float);
  {
    MpiCommunicator comm(MPI_COMM_WORLD, options(AllreduceAlgorithm::Ring));
    comm.allreduce_sum(x.data(), n);
    comm.start_allreduce_sum(x.data(), n);
    comm.wait_allreduce();
    EXPECT_EQ(sent_by_all(comm), 2 * ring_total) << "two ring sums";
    EXPECT_EQ(comm.traffic().library_sums, 0);
  }
  if (power_of_two) {
    MpiCommunicator hd(MPI_COMM_WORLD, options(AllreduceAlgorithm::HalvingDoubling));
    hd.allreduce_sum(x.data(), n);
    EXPECT_EQ(sent_by_all(hd), ring_total) << "halving-doubling";
    MpiCommunicator rd(MPI_COMM_WORLD, options(AllreduceAlgorithm::RecursiveDoubling));
    rd.allreduce_sum(x.data(), n);
    EXPECT_EQ(double(rd.traffic().bytes_sent), std::log2(double(W)) * double(n) * sizeof(float)) << "recursive doubling";
  }
  MpiCommunicator mpi(MPI_COMM_WORLD, options(AllreduceAlgorithm::Mpi));
  mpi.allreduce_sum(x.data(), n);
  mpi.start_allreduce_sum(x.data(), n);
  mpi.wait_allreduce();
  EXPECT_EQ(mpi.traffic().bytes_sent, 0u);
  EXPECT_EQ(mpi.traffic().library_sums, W > 1 ? 2 : 0);
}

TEST(Communicator, AutoFollowsItsModelPerSize) {
  const int r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, options(AllreduceAlgorithm::Auto));
  EXPECT_EQ(comm.algorithm_for(4096), AllreduceAlgorithm::Ring) << "uncalibrated auto is the ring";
  // rd below 64 KiB (cheap calls, dear bytes), hd above.
  AllreduceCostModel m;
  m.world_size = world_size();
  m.hosts = 1;
  m.max_bytes = std::size_t(1) << 30;
  m.lines[AllreduceAlgorithm::RecursiveDoubling] = {1e-6, 1e-9};
  m.lines[AllreduceAlgorithm::HalvingDoubling] = {1e-6 + 65536 * 0.5e-9, 0.5e-9};
  *comm.cost_model() = m;
  auto dup = comm.duplicate();  // shares the model (the GradReducer's duplicate)
  EXPECT_EQ(comm.algorithm_for(4096), AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(comm.algorithm_for(std::size_t(1) << 20), AllreduceAlgorithm::HalvingDoubling);
  for (std::size_t n : {std::size_t(1000), std::size_t(100000)}) {
    std::vector<float> x = input<float>(r, n);
    dup->start_allreduce_sum(x.data(), n);
    dup->wait_allreduce();
    expect_reference(x, n, n * 4 < 65536 ? Algo::Rd : Algo::Hd);
  }
  std::vector<float> z(10, 1.0f);
  comm.allreduce_sum_with(AllreduceAlgorithm::Hierarchical, z.data(), z.size());
  for (float v : z) EXPECT_EQ(v, float(world_size()));
  EXPECT_THROW(comm.allreduce_sum_with(AllreduceAlgorithm::Auto, z.data(), z.size()), Error);
}

TEST(Communicator, ParsesEveryAlgorithm) {
  for (auto a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::RecursiveDoubling,
                 AllreduceAlgorithm::Hierarchical, AllreduceAlgorithm::Mpi, AllreduceAlgorithm::Auto})
    EXPECT_EQ(parse_allreduce(allreduce_name(a)), a);
  try {
    parse_allreduce("bogus");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--allreduce: expected ring, hd, rd, hier, mpi or auto, got 'bogus'");
  }
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
