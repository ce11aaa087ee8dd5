// The MPI side of the Communicator: start-up (MpiSession), the world communicator with a choice of
// all-reduce (--allreduce: our ring, halving-doubling, recursive doubling, hierarchical, the library's
// MPI_Allreduce, or auto: per message size from a calibrated cost model), every collective guarded by
// the watchdog.
//
// Thread level: ringtrain requires MPI_THREAD_MULTIPLE and fails at start-up if the library does not
// provide it. The data path is one thread (the main thread: the GradReducer's buckets, during and after
// backward, and every other collective), but the watchdog must call MPI_Abort from its own thread while
// the main thread is blocked inside a hung MPI call, and only MULTIPLE makes concurrent calls legal.
// Open MPI 4.1 (Debian) provides it.
#pragma once
#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/dist/allreduce_algorithm.h"
#include "ringtrain/dist/allreduce_cost_model.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/halving_doubling.h"
#include "ringtrain/dist/hierarchical_allreduce.h"
#include "ringtrain/dist/recursive_doubling.h"
#include "ringtrain/dist/ring_allreduce.h"
#include "ringtrain/dist/watchdog.h"

namespace ringtrain::dist {

// True when this process was started by mpirun/mpiexec/srun (so MPI should be initialised).
bool launched_by_mpi();

// Before MPI_Init: asks Open MPI's shared-memory transport (btl vader) to copy messages through its
// shared segment (copy-in, copy-out) instead of its default single copy by a cross-process syscall
// (CMA, process_vm_readv), in eager fragments of up to 128 KiB instead of 32 KiB. For the 10-240 KiB
// gradient buckets of small models the syscall and page pinning cost more than the second copy: a
// 240 KiB all-reduce on 2 ranks takes 15 us instead of 32 us and 2-rank training runs ~4% faster
// (docs/BENCHMARKS.md, "Data parallelism"). Only where the user has not chosen (a variable already set,
// e.g. by `mpirun --mca btl_vader_single_copy_mechanism cma`, is left alone); other MPI libraries ignore
// these variables. MpiSession calls it.
void prefer_shared_memory_copies();
// Open MPI's ob1 messaging layer (shared memory through vader, other hosts through btl tcp), unless the
// user chose (OMPI_MCA_pml set, e.g. by `mpirun --mca pml ucx`). Left to choose, Open MPI 4.1 first
// initialises UCX (pml ucx) where libucx is installed, as on Debian: 0.20 s of every MPI_Init here (0.257
// -> 0.056 s, 2 ranks, Zen 5), a fixed cost that made a 3-epoch LeNet-5 run's 2-rank speed-up smaller,
// for a transport this project never uses on shared memory or TCP. On InfiniBand, set OMPI_MCA_pml=ucx.
// MpiSession calls it.
void prefer_ob1_messaging();

// MPI_Init_thread(MPI_THREAD_MULTIPLE) ... MPI_Finalize. If MPI is already initialised (e.g. by a test's
// main), only checks the thread level and leaves finalisation to whoever initialised it.
// Throws Error naming the provided level when it is below MPI_THREAD_MULTIPLE.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};
// Checks MPI_Query_thread() == MPI_THREAD_MULTIPLE; throws Error otherwise.
void require_thread_multiple();
const char* thread_level_name(int level);

// RINGTRAIN_RANKS_PER_HOST (a test's and benchmark's artificial host split for --allreduce hier / auto on
// one machine); 0 when unset: hosts are shared-memory domains.
int ranks_per_host_from_env();

struct MpiOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Ring;
  double timeout_s = 1800;  // watchdog; <= 0 disables
  RingOptions ring;
  int ranks_per_host = 0;  // hierarchical's host split: 0 by shared memory, k: rank / k
  // Auto's model, shared by the communicator and its duplicates (the GradReducer's), so a calibration or a
  // checkpoint's model set after they exist reaches all of them. Until it holds a calibration auto is ring.
  std::shared_ptr<AllreduceCostModel> cost_model;
  Watchdog::TimeoutAction on_timeout = Watchdog::abort_job;  // tests replace it
  // The group's name in the watchdog's messages ("pipeline", "tensor", "data-parallel"); empty: the world.
  std::string group;
};

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates comm, so this communicator's traffic is its own.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, const MpiOptions& opt = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, std::size_t n) override;
  void allreduce_sum(double* data, std::size_t n) override;
  void allreduce_sum(int64_t* data, std::size_t n) override;
  void start_allreduce_sum(float* data, std::size_t n) override;
  bool test_allreduce() override;
  void wait_allreduce() override;
  // Our ring's two phases (whatever --allreduce says: only the ring has them).
  void start_reduce_scatter_sum(float* data, std::size_t n) override;
  void start_all_gather(float* data, std::size_t n) override;
  Range shard_chunk(std::size_t n) const override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> duplicate() override;
  // Point-to-point on a communicator of its own (a duplicate made at construction), so its tags never
  // meet the all-reduces'. Waits poll in the calling thread's PollMode and are watched by the watchdog.
  Request start_send(const void* data, std::size_t bytes, int peer, int tag, const char* what) override;
  Request start_recv(void* data, std::size_t bytes, int peer, int tag, const char* what) override;
  bool test_p2p(Request r) override;
  void wait_p2p(Request r) override;
  // World rank of rank r of this communicator.
  int world_rank_of(int r) const { return world_ranks_[std::size_t(r)]; }

  // The float sum with a given algorithm (never Auto), whatever this communicator's --allreduce: the
  // calibration and the benchmark time each one on the same communicator.
  void allreduce_sum_with(AllreduceAlgorithm a, float* data, std::size_t n);
  // What a sum of this many bytes runs: the --allreduce choice, or auto's pick.
  AllreduceAlgorithm algorithm_for(std::size_t bytes) const;

  Traffic traffic() const override;
  AllreduceAlgorithm algorithm() const { return opt_.algorithm; }
  // The hosts the ranks are on, as the hierarchical all-reduce splits them (by host name, or
  // RINGTRAIN_RANKS_PER_HOST), whatever algorithm runs.
  int hosts() const { return hosts_; }
  const std::shared_ptr<AllreduceCostModel>& cost_model() const { return opt_.cost_model; }
  MPI_Comm comm() const { return comm_; }
  Watchdog& watchdog() { return *watchdog_; }

 private:
  MpiCommunicator(MPI_Comm comm, const MpiOptions& opt, std::shared_ptr<Watchdog> watchdog);
  template <typename T>
  void allreduce(T* data, std::size_t n, MPI_Datatype type, const char* dtype);
  template <typename T>
  void run(AllreduceAlgorithm a, T* data, std::size_t n, MPI_Datatype type);
  ScheduledAllreduce& scheduled(AllreduceAlgorithm a);  // hd, rd or hier

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  MpiOptions opt_;
  std::shared_ptr<Watchdog> watchdog_;  // shared with duplicates
  std::unique_ptr<RingAllreduce> ring_;
  std::unique_ptr<HalvingDoublingAllreduce> hd_;
  std::unique_ptr<RecursiveDoublingAllreduce> rd_;
  std::unique_ptr<HierarchicalAllreduce> hier_;  // only for hier and auto (its split is collective)
  int hosts_ = 1;
  AllreduceAlgorithm pending_algorithm_ = AllreduceAlgorithm::Ring;  // the non-blocking sum's
  std::int64_t library_sums_ = 0;  // sums run by MPI_Allreduce / MPI_Iallreduce (traffic())
  // The non-blocking float sum in flight: the watchdog is armed from start to completion.
  std::optional<Watchdog::Guard> pending_guard_;
  MPI_Request pending_mpi_ = MPI_REQUEST_NULL;  // --allreduce mpi: MPI_Iallreduce's request
  void start_ring(float* data, std::size_t n, RingPhase phase, const char* what);
  // Point-to-point: its own communicator, the requests in flight (a slot each, reused), their peers.
  struct P2p {
    MPI_Request request = MPI_REQUEST_NULL;
    const char* what = "";
    std::size_t bytes = 0;
    int peer = -1;
    bool used = false;
  };
  Request start_p2p(void* data, std::size_t bytes, int peer, int tag, const char* what, bool send);
  P2p& p2p_slot(Request r);
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  std::vector<P2p> p2p_;
  std::vector<int> world_ranks_;  // world_ranks_[r]: the world rank of this communicator's rank r
};

}  // namespace ringtrain::dist
