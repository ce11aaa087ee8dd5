// All-reduce bandwidth: our ring (dist/ring_allreduce) against the library's MPI_Allreduce, fp32 sums
// of 4 KiB .. 64 MiB. Validates both against each other first, then times each size `repeats` times,
// ring and mpi interleaved (so machine noise hits both alike); a repeat's time is the slowest rank's.
// Reports the median, algorithm bandwidth (bytes / time) and bus bandwidth (x 2(W-1)/W, the bytes each
// rank actually moves, as nccl-tests do), and ring / mpi. Run it with bench/allreduce.sh.
//
//   mpirun -np 2 bench_allreduce [--min-kb 4] [--max-kb 65536] [--repeats 21] [--segment-kb 512]
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/ring_allreduce.h"

using namespace ringtrain;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  dist::MpiSession mpi(&argc, &argv);
  int rank = 0, W = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  std::size_t min_kb = 4, max_kb = 65536, segment_kb = dist::RingOptions{}.segment_bytes >> 10;
  int repeats = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long v = std::atol(argv[i + 1]);
    if (a == "--min-kb") min_kb = v;
    else if (a == "--max-kb") max_kb = v;
    else if (a == "--repeats") repeats = int(v);
    else if (a == "--segment-kb") segment_kb = v;
    else {
      if (rank == 0) std::fprintf(stderr, "bench_allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  dist::RingAllreduce ring(comm, {.segment_bytes = segment_kb << 10});
  int provided = 0;
  MPI_Query_thread(&provided);
  if (rank == 0) {
    std::printf("# all-reduce fp32 sum, %d ranks, ring segment %zu KiB, median of %d, thread level %s\n", W,
                segment_kb, repeats, dist::thread_level_name(provided));
    std::printf("| size | ring time (us) | ring algbw (GB/s) | ring busbw (GB/s) | mpi time (us) | mpi algbw (GB/s) | mpi busbw (GB/s) | ring / mpi |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (std::size_t kb = min_kb; kb <= max_kb; kb *= 4) {
    const std::size_t n = (kb << 10) / sizeof(float);
    std::vector<float> a(n), b(n), init(n);
    for (std::size_t i = 0; i < n; ++i) init[i] = float((i * 7 + rank * 13) % 101) - 50.0f;  // exact sums
    // Validate: both algorithms give the exact (integer-valued) sums.
    a = init;
    b = init;
    ring.run(a.data(), n);
    MPI_Allreduce(MPI_IN_PLACE, b.data(), int(n), MPI_FLOAT, MPI_SUM, comm);
    if (std::memcmp(a.data(), b.data(), n * sizeof(float)) != 0) {
      std::fprintf(stderr, "bench_allreduce: rank %d: ring and MPI_Allreduce disagree at %zu KiB\n", rank, kb);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::vector<double> t_ring, t_mpi;
    for (int r = 0; r < repeats + 2; ++r) {  // the first two are warm-up
      for (int algo = 0; algo < 2; ++algo) {
        float* buf = algo == 0 ? a.data() : b.data();
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        if (algo == 0) ring.run(buf, n);
        else MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, comm);
        double t = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (r >= 2) (algo == 0 ? t_ring : t_mpi).push_back(slowest);
      }
    }
    if (rank == 0) {
      const double bytes = double(n) * sizeof(float), bus = W > 1 ? 2.0 * (W - 1) / W : 1.0;
      double tr = median(t_ring), tm = median(t_mpi);
      std::string size = kb >= 1024 ? std::to_string(kb / 1024) + " MiB" : std::to_string(kb) + " KiB";
      std::printf("| %s | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f |\n", size.c_str(), tr * 1e6,
                  bytes / tr / 1e9, bytes / tr / 1e9 * bus, tm * 1e6, bytes / tm / 1e9, bytes / tm / 1e9 * bus,
                  tm / tr);
      std::fflush(stdout);
    }
  }
  MPI_Comm_free(&comm);
  return 0;
}
