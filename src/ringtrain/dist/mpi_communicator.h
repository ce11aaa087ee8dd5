// The MPI side of the Communicator: start-up (MpiSession), the world communicator with a choice of
// all-reduce (our ring, or the library's MPI_Allreduce), every collective guarded by the watchdog.
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

#include "ringtrain/dist/communicator.h"
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

enum class AllreduceAlgorithm { Ring, Mpi };
// "ring" | "mpi"; throws Error naming the option otherwise.
AllreduceAlgorithm parse_allreduce(const std::string& name);
const char* allreduce_name(AllreduceAlgorithm a);

struct MpiOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Ring;
  double timeout_s = 1800;  // watchdog; <= 0 disables
  RingOptions ring;
  Watchdog::TimeoutAction on_timeout = Watchdog::abort_job;  // tests replace it
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

  AllreduceAlgorithm algorithm() const { return opt_.algorithm; }
  MPI_Comm comm() const { return comm_; }
  Watchdog& watchdog() { return *watchdog_; }

 private:
  MpiCommunicator(MPI_Comm comm, const MpiOptions& opt, std::shared_ptr<Watchdog> watchdog);
  template <typename T>
  void allreduce(T* data, std::size_t n, MPI_Datatype type, const char* dtype);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  MpiOptions opt_;
  std::shared_ptr<Watchdog> watchdog_;  // shared with duplicates
  std::unique_ptr<RingAllreduce> ring_;
  // The non-blocking float sum in flight: the watchdog is armed from start to completion.
  std::optional<Watchdog::Guard> pending_guard_;
  MPI_Request pending_mpi_ = MPI_REQUEST_NULL;  // --allreduce mpi: MPI_Iallreduce's request
  bool pending_on_ring_ = false;                // the operation in flight runs on ring_
  void start_ring(float* data, std::size_t n, RingPhase phase, const char* what);
};

}  // namespace ringtrain::dist
