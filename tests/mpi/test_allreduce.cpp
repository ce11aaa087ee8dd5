// Ring all-reduce (and the MPI_Allreduce path) against a serial sum, for every world size the test
// runs under, lengths 0/1, W-1 and 1000003 (not divisible by 2, 3 or 4), fp32, fp64 and int64.
//
// Bounds. The ring sums element i in a fixed order: the left fold over ranks c, c+1, ..., c+W-1 (mod W)
// where c = ring_fold_start(i); fp32/fp64 results must equal that fold bit for bit. Against the exact
// sum, any order of W-1 additions is within gamma_{W-1} * sum|x_r| with gamma_k = k*u/(1-k*u), u the
// unit roundoff (Higham, Accuracy and Stability, 4.2); MPI_Allreduce is held to that bound. int64 exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "mpi_gtest.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {
namespace {

using ringtrain::testing::world_rank;
using ringtrain::testing::world_size;

// Rank r's input: deterministic in (r, i), so every rank can compute every rank's values.
template <typename T>
std::vector<T> input(int r, std::size_t n) {
  Rng rng(1000 + uint64_t(r));
  std::vector<T> x(n);
  for (auto& v : x) {
    if constexpr (std::is_integral_v<T>) {
      v = T(int64_t(rng.next_u64() >> 24) - (int64_t(1) << 39));  // ~2^40, sums stay exact
    } else {
      // Mixed magnitudes so that the order of additions matters for the bits.
      v = T(rng.uniform(-1.0f, 1.0f)) * T(std::ldexp(1.0, int(rng.below(20)) - 10));
    }
  }
  return x;
}

template <typename T>
void expect_ring_sum(const std::vector<T>& got, std::size_t n, int W) {
  std::vector<std::vector<T>> xs;
  for (int r = 0; r < W; ++r) xs.push_back(input<T>(r, n));
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double gamma = (W - 1) * u / (1 - (W - 1) * u);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    int c = ring_fold_start(n, W, i);
    T fold = xs[c][i];
    long double exact = (long double)xs[c][i], abs_sum = std::fabs((long double)xs[c][i]);
    for (int j = 1; j < W; ++j) {
      T v = xs[(c + j) % W][i];
      fold = fold + v;
      exact += (long double)v;
      abs_sum += std::fabs((long double)v);
    }
    if constexpr (std::is_integral_v<T>) {
      if (got[i] != fold && mismatches++ < 5) ADD_FAILURE() << "i=" << i << " got " << got[i] << " want " << fold;
    } else {
      if (std::memcmp(&got[i], &fold, sizeof(T)) != 0 && mismatches++ < 5)
        ADD_FAILURE() << "i=" << i << " got " << got[i] << " fixed-order fold " << fold;
      if (std::fabs((long double)got[i] - exact) > gamma * abs_sum && mismatches++ < 5)
        ADD_FAILURE() << "i=" << i << " got " << got[i] << " beyond gamma_{W-1} * sum|x| of the exact sum";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << n << " elements";
}

template <typename T>
void expect_within_bound(const std::vector<T>& got, std::size_t n, int W) {
  std::vector<std::vector<T>> xs;
  for (int r = 0; r < W; ++r) xs.push_back(input<T>(r, n));
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double gamma = (W - 1) * u / (1 - (W - 1) * u);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    long double exact = 0, abs_sum = 0;
    for (int r = 0; r < W; ++r) {
      exact += (long double)xs[r][i];
      abs_sum += std::fabs((long double)xs[r][i]);
    }
    if constexpr (std::is_integral_v<T>) {
      if ((long double)got[i] != exact && bad++ < 5) ADD_FAILURE() << "i=" << i;
    } else {
      if (std::fabs((long double)got[i] - exact) > gamma * abs_sum && bad++ < 5)
        ADD_FAILURE() << "i=" << i << " got " << got[i] << " exact " << (double)exact;
    }
  }
  EXPECT_EQ(bad, 0u);
}

// Every rank must hold the same bits.
template <typename T>
void expect_same_on_all_ranks(const std::vector<T>& got) {
  std::vector<T> root = got;
  MPI_Bcast(root.data(), int(root.size() * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), got.data(), got.size() * sizeof(T)), 0) << "rank " << world_rank();
}

std::vector<std::size_t> lengths() {
  int W = world_size();
  return {0, 1, std::size_t(W - 1), std::size_t(W + 1), 4099, 1000003};
}

template <typename T>
void check_ring(const RingOptions& opt) {
  const int W = world_size(), r = world_rank();
  RingAllreduce ring(MPI_COMM_WORLD, opt);
  for (std::size_t n : lengths()) {
    for (int repeat = 0; repeat < 2; ++repeat) {  // the scratch buffer is reused
      std::vector<T> x = input<T>(r, n);
      ring.run(x.data(), n);
      SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(W) + " segment_bytes=" +
                   std::to_string(opt.segment_bytes) + " repeat=" + std::to_string(repeat));
      expect_ring_sum(x, n, W);
      expect_same_on_all_ranks(x);
    }
  }
}

TEST(RingAllreduce, Fp32DefaultSegments) { check_ring<float>({}); }
TEST(RingAllreduce, Fp64DefaultSegments) { check_ring<double>({}); }
TEST(RingAllreduce, Int64DefaultSegments) { check_ring<int64_t>({}); }
// Many segments a chunk: exercises the pipelining and the tag-ordered matching.
TEST(RingAllreduce, Fp32SmallSegments) { check_ring<float>({.segment_bytes = 4096}); }
TEST(RingAllreduce, Int64SmallSegments) { check_ring<int64_t>({.segment_bytes = 4096}); }

// Waiting by MPI_Test* + sched_yield (the tensor group's all-reduce) gives the same results.
TEST(RingAllreduce, YieldPolling) {
  set_thread_poll_mode(PollMode::Yield);
  check_ring<float>({.segment_bytes = 4096});
  check_ring<double>({});
  set_thread_poll_mode(PollMode::Spin);
}

TEST(RingAllreduce, AdaptivePolling) {
  set_thread_poll_mode(PollMode::Adaptive);
  check_ring<float>({.segment_bytes = 4096});
  check_ring<int64_t>({});
  set_thread_poll_mode(PollMode::Spin);
}

// The resumable ring (start / progress / finish, as the GradReducer drives it between layers): the same
// fixed-order bits whatever the ranks do between calls - here rank r makes r extra idle progress calls
// and some ranks never call finish(), completing on progress() alone.
template <typename T>
void check_resumable_ring(const RingOptions& opt) {
  const int W = world_size(), r = world_rank();
  RingAllreduce ring(MPI_COMM_WORLD, opt);
  for (std::size_t n : lengths()) {
    std::vector<T> x = input<T>(r, n);
    ring.start(x.data(), n);
    for (int i = 0; i < r; ++i) ring.progress();
    if (r % 2 == 0) {
      ring.finish();
    } else {
      while (!ring.progress()) {
      }
    }
    EXPECT_FALSE(ring.active());
    SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(W) + " segment_bytes=" +
                 std::to_string(opt.segment_bytes));
    expect_ring_sum(x, n, W);
    expect_same_on_all_ranks(x);
  }
}

TEST(RingAllreduce, ResumableFp32) { check_resumable_ring<float>({}); }
TEST(RingAllreduce, ResumableFp32SmallSegments) { check_resumable_ring<float>({.segment_bytes = 4096}); }
TEST(RingAllreduce, ResumableFp64SmallSegments) { check_resumable_ring<double>({.segment_bytes = 4096}); }
TEST(RingAllreduce, ResumableInt64) { check_resumable_ring<int64_t>({}); }

TEST(RingAllreduce, RefusesASecondStartWhileOneIsInFlight) {
  const int W = world_size();
  RingAllreduce ring(MPI_COMM_WORLD);
  std::vector<float> a(100, 1.0f), b(100, 1.0f);
  ring.start(a.data(), a.size());
  if (W > 1) EXPECT_THROW(ring.start(b.data(), b.size()), Error);
  ring.finish();
  for (float v : a) ASSERT_EQ(v, float(W));
}

TEST(RingAllreduce, OneElementSegments) {
  const int W = world_size(), r = world_rank();
  RingAllreduce ring(MPI_COMM_WORLD, {.segment_bytes = 4});
  for (std::size_t n : {std::size_t(1), std::size_t(W), std::size_t(7 * W + 3), std::size_t(1000)}) {
    std::vector<float> x = input<float>(r, n);
    ring.run(x.data(), n);
    SCOPED_TRACE("n=" + std::to_string(n));
    expect_ring_sum(x, n, W);
  }
}

TEST(RingAllreduce, ChunksCoverTheBuffer) {
  for (int W = 1; W <= 5; ++W)
    for (std::size_t n : {0, 1, 2, 3, 4, 5, 1000003}) {
      EXPECT_EQ(ring_chunk_begin(n, W, 0), 0u);
      EXPECT_EQ(ring_chunk_begin(n, W, W), n);
      for (int c = 0; c < W; ++c) {
        std::size_t len = ring_chunk_begin(n, W, c + 1) - ring_chunk_begin(n, W, c);
        EXPECT_LE(len, (n + W - 1) / W);
        EXPECT_GE(len, n / W);
      }
    }
}

// A communicator's options in these tests: the algorithm, and a watchdog that ends a hung test.
MpiOptions options(AllreduceAlgorithm algo) {
  MpiOptions opt;
  opt.algorithm = algo;
  opt.timeout_s = 60;
  return opt;
}

template <typename T>
void check_communicator(AllreduceAlgorithm algo) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, options(algo));
  EXPECT_EQ(comm.rank(), r);
  EXPECT_EQ(comm.size(), W);
  for (std::size_t n : lengths()) {
    std::vector<T> x = input<T>(r, n);
    comm.allreduce_sum(x.data(), n);
    SCOPED_TRACE("n=" + std::to_string(n) + " algo=" + allreduce_name(algo));
    if (algo == AllreduceAlgorithm::Ring) expect_ring_sum(x, n, W);
    else expect_within_bound(x, n, W);
  }
}

TEST(MpiCommunicator, RingFp32) { check_communicator<float>(AllreduceAlgorithm::Ring); }
TEST(MpiCommunicator, RingFp64) { check_communicator<double>(AllreduceAlgorithm::Ring); }
TEST(MpiCommunicator, RingInt64) { check_communicator<int64_t>(AllreduceAlgorithm::Ring); }
TEST(MpiCommunicator, MpiFp32) { check_communicator<float>(AllreduceAlgorithm::Mpi); }
TEST(MpiCommunicator, MpiFp64) { check_communicator<double>(AllreduceAlgorithm::Mpi); }
TEST(MpiCommunicator, MpiInt64) { check_communicator<int64_t>(AllreduceAlgorithm::Mpi); }

TEST(MpiCommunicator, MpiYieldPolling) {  // MPI_Iallreduce + test/yield
  set_thread_poll_mode(PollMode::Yield);
  check_communicator<float>(AllreduceAlgorithm::Mpi);
  check_communicator<int64_t>(AllreduceAlgorithm::Mpi);
  set_thread_poll_mode(PollMode::Spin);
}

// The non-blocking float sum through the communicator (what the GradReducer uses): same results as the
// blocking call, for both algorithms, with tests in between; two in a row reuse the communicator.
void check_nonblocking(AllreduceAlgorithm algo) {
  const int W = world_size(), r = world_rank();
  MpiCommunicator comm(MPI_COMM_WORLD, options(algo));
  for (std::size_t n : lengths()) {
    std::vector<float> x = input<float>(r, n), y = input<float>(r, n);
    comm.start_allreduce_sum(x.data(), n);
    for (int i = 0; i <= r; ++i) comm.test_allreduce();
    comm.wait_allreduce();
    EXPECT_TRUE(comm.test_allreduce()) << "nothing in flight after wait";
    comm.start_allreduce_sum(y.data(), n);
    while (!comm.test_allreduce()) {
    }
    SCOPED_TRACE("n=" + std::to_string(n) + " algo=" + allreduce_name(algo));
    if (algo == AllreduceAlgorithm::Ring) expect_ring_sum(x, n, W);
    else expect_within_bound(x, n, W);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0) << "wait() and test() differ";
    expect_same_on_all_ranks(x);
  }
}

TEST(MpiCommunicator, NonBlockingRing) { check_nonblocking(AllreduceAlgorithm::Ring); }
TEST(MpiCommunicator, NonBlockingMpi) { check_nonblocking(AllreduceAlgorithm::Mpi); }

TEST(MpiCommunicator, BroadcastAndDuplicate) {
  const int W = world_size(), r = world_rank();
  MpiOptions opt;
  opt.timeout_s = 60;
  MpiCommunicator comm(MPI_COMM_WORLD, opt);
  auto dup = comm.duplicate();
  EXPECT_EQ(dup->size(), W);
  EXPECT_EQ(dup->rank(), r);
  for (int root = 0; root < W; ++root) {
    std::vector<int> v(1001, r * 7 + 1);
    dup->broadcast(v.data(), v.size() * sizeof(int), root);
    for (int x : v) ASSERT_EQ(x, root * 7 + 1);
  }
  EXPECT_THROW(comm.broadcast(nullptr, 4, W), Error);
  comm.barrier();
  int64_t one = 1;
  dup->allreduce_sum(&one, 1);
  EXPECT_EQ(one, W);
}

TEST(MpiCommunicator, ParsesAlgorithm) {
  EXPECT_EQ(parse_allreduce("ring"), AllreduceAlgorithm::Ring);
  EXPECT_EQ(parse_allreduce("mpi"), AllreduceAlgorithm::Mpi);
  EXPECT_THROW(parse_allreduce("tree"), Error);
}

TEST(MpiSession, PrefersSharedMemoryCopiesUnlessTheUserChose) {
  const char* name = "OMPI_MCA_btl_vader_single_copy_mechanism";
  const char* before = std::getenv(name);
  const std::string saved = before ? before : "";
  unsetenv(name);
  prefer_shared_memory_copies();
  ASSERT_NE(std::getenv(name), nullptr);
  EXPECT_STREQ(std::getenv(name), "none");
  setenv(name, "cma", 1);
  prefer_shared_memory_copies();
  EXPECT_STREQ(std::getenv(name), "cma") << "the user's choice was overwritten";
  ASSERT_NE(std::getenv("OMPI_MCA_btl_vader_max_send_size"), nullptr);
  ASSERT_NE(std::getenv("OMPI_MCA_btl_vader_eager_limit"), nullptr);
  if (before) setenv(name, saved.c_str(), 1);
  else unsetenv(name);
}

// MpiSession ran prefer_ob1_messaging before MPI_Init (this test binary's main builds one): ob1 unless the
// launcher had chosen; a choice made later is left alone.
TEST(MpiSession, PrefersOb1UnlessTheUserChose) {
  const char* before = std::getenv("OMPI_MCA_pml");
  ASSERT_NE(before, nullptr);
  const std::string saved = before;
  setenv("OMPI_MCA_pml", "cm", 1);
  prefer_ob1_messaging();
  EXPECT_STREQ(std::getenv("OMPI_MCA_pml"), "cm") << "the user's choice was overwritten";
  unsetenv("OMPI_MCA_pml");
  prefer_ob1_messaging();
  EXPECT_STREQ(std::getenv("OMPI_MCA_pml"), "ob1");
  setenv("OMPI_MCA_pml", saved.c_str(), 1);
}

TEST(MpiCommunicator, ThreadLevelIsMultiple) {
  int provided = 0;
  MPI_Query_thread(&provided);
  EXPECT_EQ(provided, MPI_THREAD_MULTIPLE) << thread_level_name(provided);
  EXPECT_NO_THROW(require_thread_multiple());
}

}  // namespace
}  // namespace ringtrain::dist

int main(int argc, char** argv) { return ringtrain::testing::run_mpi_tests(argc, argv); }
