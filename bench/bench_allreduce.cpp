// All-reduce time by algorithm: ringtrain's ring, halving-doubling (hd), recursive doubling (rd),
// hierarchical (hier), the library's MPI_Allreduce (mpi), and --allreduce auto (the pick of the
// calibrated cost model, dist/allreduce_calibration.h), fp32 sums of 4 KiB .. 64 MiB. Validates every
// algorithm against MPI_Allreduce first (integer-valued data: exact sums), then times each size
// `repeats` times, all algorithms interleaved in a rotating order (so machine noise hits them alike); a repeat's time is the
// slowest rank's. Prints the medians, the fastest algorithm, auto's pick, and auto's time over the fastest
// and over the fastest of ring, hd and mpi (the acceptance figures of docs/BENCHMARKS.md). Run it with
// bench/allreduce.sh; RINGTRAIN_RANKS_PER_HOST=k splits the ranks into artificial hosts for hier.
// --cold-mb M: before every timed call each rank writes M MiB elsewhere (the caches then hold that, as
// after a backward pass, not the buffer the call sums).
//
//   mpirun -np 2 bench_allreduce [--min-kb 4] [--max-kb 65536] [--repeats 21] [--segment-kb 512] [--step 4]
//                                [--cold-mb 0]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/dist/allreduce_calibration.h"
#include "ringtrain/dist/mpi_communicator.h"

using namespace ringtrain;
using dist::AllreduceAlgorithm;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  dist::MpiSession mpi(&argc, &argv);
  int rank = 0, W = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  std::size_t min_kb = 4, max_kb = 65536, segment_kb = dist::RingOptions{}.segment_bytes >> 10, step = 4;
  int repeats = 21;
  std::size_t cold_mb = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long v = std::atol(argv[i + 1]);
    if (a == "--min-kb") min_kb = v;
    else if (a == "--max-kb") max_kb = v;
    else if (a == "--repeats") repeats = int(v);
    else if (a == "--segment-kb") segment_kb = v;
    else if (a == "--step") step = std::max<long>(2, v);
    else if (a == "--cold-mb") cold_mb = std::size_t(std::max<long>(0, v));
    else {
      if (rank == 0) std::fprintf(stderr, "bench_allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  dist::MpiOptions opt;
  opt.algorithm = AllreduceAlgorithm::Auto;
  opt.ring.segment_bytes = segment_kb << 10;
  opt.ranks_per_host = dist::ranks_per_host_from_env();
  dist::MpiCommunicator comm(MPI_COMM_WORLD, opt);
  const dist::Calibration cal = dist::load_or_calibrate(comm, "");
  *comm.cost_model() = cal.model;
  const std::vector<AllreduceAlgorithm>& algos = dist::concrete_allreduce_algorithms();
  const std::size_t A = algos.size();  // column A is auto
  if (rank == 0) {
    std::printf("# all-reduce fp32 sum, %d ranks on %d host(s) (hier: %d ranks a host), ring segment %zu KiB, median of %d; auto %s%s\n",
                W, comm.hosts(), W / std::max(1, comm.hosts()), segment_kb, repeats, cal.how.c_str(),
                cold_mb ? ("; caches evicted before each call (" + std::to_string(cold_mb) + " MiB written)").c_str() : "");
    std::printf("| size |");
    for (auto a : algos) std::printf(" %s (us) |", dist::allreduce_name(a));
    std::printf(" auto (us) | auto's pick | fastest | auto / fastest | auto / best of ring, hd, mpi |\n|---:|");
    for (std::size_t a = 0; a <= A; ++a) std::printf("---:|");
    std::printf("---|---|---:|---:|\n");
  }
  std::vector<float> evict(cold_mb << 18);
  float stamp = 0.0f;
  for (std::size_t kb = min_kb; kb <= max_kb; kb *= step) {
    const std::size_t n = (kb << 10) / sizeof(float);
    std::vector<float> init(n), want(n), buf(n);
    for (std::size_t i = 0; i < n; ++i) init[i] = float((i * 7 + rank * 13) % 101) - 50.0f;  // exact sums
    want = init;
    MPI_Allreduce(MPI_IN_PLACE, want.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t a = 0; a <= A; ++a) {
      buf = init;
      if (a < A) comm.allreduce_sum_with(algos[a], buf.data(), n);
      else comm.allreduce_sum(buf.data(), n);
      if (std::memcmp(buf.data(), want.data(), n * sizeof(float)) != 0) {
        std::fprintf(stderr, "bench_allreduce: rank %d: %s disagrees with MPI_Allreduce at %zu KiB\n", rank,
                     a < A ? dist::allreduce_name(algos[a]) : "auto", kb);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    std::vector<std::vector<double>> t(A + 1);
    for (int r = 0; r < repeats + 2; ++r) {  // the first two are warm-up
      // Each repeat starts at another algorithm: on a shared machine a slot's place in the round (what ran
      // just before it, where the scheduler's time slice falls) biases its time.
      for (std::size_t k = 0; k <= A; ++k) {
        const std::size_t a = (k + std::size_t(r)) % (A + 1);
        if (!evict.empty()) std::fill(evict.begin(), evict.end(), stamp += 1.0f);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (a < A) comm.allreduce_sum_with(algos[a], buf.data(), n);
        else comm.allreduce_sum(buf.data(), n);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 2) t[a].push_back(slowest);
      }
    }
    if (rank == 0) {
      std::vector<double> med;
      for (auto& v : t) med.push_back(median(v));
      std::size_t fastest = 0;
      for (std::size_t a = 1; a < A; ++a)
        if (med[a] < med[fastest]) fastest = a;
      double best3 = 1e30;
      for (std::size_t a = 0; a < A; ++a)
        if (algos[a] == AllreduceAlgorithm::Ring || algos[a] == AllreduceAlgorithm::HalvingDoubling ||
            algos[a] == AllreduceAlgorithm::Mpi)
          best3 = std::min(best3, med[a]);
      std::string size = kb >= 1024 ? std::to_string(kb / 1024) + " MiB" : std::to_string(kb) + " KiB";
      std::printf("| %s |", size.c_str());
      for (std::size_t a = 0; a <= A; ++a) std::printf(" %.1f |", med[a] * 1e6);
      std::printf(" %s | %s | %.2f | %.2f |\n", dist::allreduce_name(comm.algorithm_for(n * sizeof(float))),
                  dist::allreduce_name(algos[fastest]), med[A] / med[fastest], med[A] / best3);
      std::fflush(stdout);
    }
  }
  return 0;
}
