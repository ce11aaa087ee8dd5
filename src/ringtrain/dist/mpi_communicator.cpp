#include "ringtrain/dist/mpi_communicator.h"

#include <climits>
#include <cstdlib>
#include <exception>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

static void check_level(int provided) {
  check(provided >= MPI_THREAD_MULTIPLE,
        std::string("MPI: the library provides ") + thread_level_name(provided) +
            " but ringtrain needs MPI_THREAD_MULTIPLE (the gradient-reduction thread and the watchdog call "
            "MPI beside the main thread); use an MPI built with thread-multiple support");
}

void require_thread_multiple() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  check_level(provided);
}

void prefer_shared_memory_copies() {
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
  // Fragments of up to 128 KiB (default 32 KiB), sent eagerly (default: up to 4 KiB, larger messages wait
  // for the receiver's acknowledgement, which only comes back when both ranks are in an MPI call again):
  // a 120 KiB ring step leaves with the send, in one fragment, while the sender goes on computing.
  setenv("OMPI_MCA_btl_vader_max_send_size", "131072", /*overwrite=*/0);
  setenv("OMPI_MCA_btl_vader_eager_limit", "131072", /*overwrite=*/0);
}

void prefer_ob1_messaging() { setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0); }

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    require_thread_multiple();
    return;
  }
  prefer_shared_memory_copies();
  prefer_ob1_messaging();
  int provided = MPI_THREAD_SINGLE;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS,
        "MPI: MPI_Init_thread failed");
  owns_ = true;
  check_level(provided);
}

MpiSession::~MpiSession() {
  // Unwinding an error: MPI_Finalize could wait forever for ranks that did not fail. Leave without it;
  // the caller prints the error and exits non-zero, and mpirun then ends the whole job.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

int ranks_per_host_from_env() {
  const char* v = std::getenv("RINGTRAIN_RANKS_PER_HOST");
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long k = std::strtol(v, &end, 10);
  check(*end == 0 && k >= 1 && k <= INT_MAX, std::string("RINGTRAIN_RANKS_PER_HOST: expected a positive integer, got '") + v + "'");
  return int(k);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& opt) : MpiCommunicator(comm, opt, nullptr) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& opt, std::shared_ptr<Watchdog> watchdog)
    : opt_(opt), watchdog_(std::move(watchdog)) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_dup(comm_, &p2p_comm_);
  {  // world ranks, for messages naming a peer
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> mine(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) mine[std::size_t(r)] = r;
    world_ranks_.assign(std::size_t(size_), -1);
    MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  if (!watchdog_) {
    watchdog_ = std::make_shared<Watchdog>(opt_.timeout_s, rank_, size_, opt_.on_timeout);
    if (!opt_.group.empty()) {
      std::vector<int> peers;  // the group's other ranks: a collective that hangs waits on one of them
      for (int r = 0; r < size_; ++r)
        if (r != rank_) peers.push_back(world_ranks_[std::size_t(r)]);
      watchdog_->set_group(opt_.group, world_ranks_[std::size_t(rank_)], peers);
    }
  }
  ring_ = std::make_unique<RingAllreduce>(comm_, opt_.ring);
  hd_ = std::make_unique<HalvingDoublingAllreduce>(comm_);
  rd_ = std::make_unique<RecursiveDoublingAllreduce>(comm_);
  if (opt_.algorithm == AllreduceAlgorithm::Auto && !opt_.cost_model) opt_.cost_model = std::make_shared<AllreduceCostModel>();
  if (opt_.algorithm == AllreduceAlgorithm::Hierarchical || opt_.algorithm == AllreduceAlgorithm::Auto)
    hier_ = std::make_unique<HierarchicalAllreduce>(comm_, opt_.ranks_per_host);
  // (A world of one is one host; otherwise the split is collective, as the constructor is.)
  hosts_ = hier_ ? hier_->hosts() : size_ == 1 ? 1 : HierarchicalAllreduce(comm_, opt_.ranks_per_host).hosts();
}

AllreduceAlgorithm MpiCommunicator::algorithm_for(std::size_t bytes) const {
  if (opt_.algorithm != AllreduceAlgorithm::Auto) return opt_.algorithm;
  return opt_.cost_model->choose(bytes);  // ring until calibrated
}

ScheduledAllreduce& MpiCommunicator::scheduled(AllreduceAlgorithm a) {
  if (a == AllreduceAlgorithm::HalvingDoubling) return *hd_;
  if (a == AllreduceAlgorithm::RecursiveDoubling) return *rd_;
  check(a == AllreduceAlgorithm::Hierarchical, std::string("all-reduce: no schedule for ") + allreduce_name(a));
  if (!hier_) throw Error("all-reduce: hier on a communicator built without it (--allreduce hier or auto)");
  return *hier_;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (!finalized && p2p_comm_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_comm_);
}

template <typename T>
void MpiCommunicator::allreduce(T* data, std::size_t n, MPI_Datatype type, const char* dtype) {
  if (size_ == 1 || n == 0) return;
  const AllreduceAlgorithm a = algorithm_for(n * sizeof(T));
  auto guard = watchdog_->arm("allreduce_sum", dtype, n, allreduce_name(a));
  run(a, data, n, type);
}

template <typename T>
void MpiCommunicator::run(AllreduceAlgorithm a, T* data, std::size_t n, MPI_Datatype type) {
  if (a == AllreduceAlgorithm::Ring) {
    ring_->run(data, n);
    return;
  }
  if (a != AllreduceAlgorithm::Mpi) {
    scheduled(a).run(data, n);
    return;
  }
  ++library_sums_;
  for (std::size_t done = 0; done < n;) {  // MPI counts are int
    int count = int(std::min<std::size_t>(n - done, INT_MAX));
    if (thread_poll_mode() == PollMode::Spin) {
      MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, comm_);
    } else {  // the same library all-reduce, non-blocking, so this thread can yield its core while waiting
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, comm_, &req);
      wait_request(&req);
    }
    done += std::size_t(count);
  }
}

void MpiCommunicator::allreduce_sum_with(AllreduceAlgorithm a, float* data, std::size_t n) {
  check(a != AllreduceAlgorithm::Auto, "allreduce_sum_with: name an algorithm, not auto");
  if (size_ == 1 || n == 0) return;
  auto guard = watchdog_->arm("allreduce_sum", "float", n, allreduce_name(a));
  run(a, data, n, MPI_FLOAT);
}

void MpiCommunicator::allreduce_sum(float* data, std::size_t n) { allreduce(data, n, MPI_FLOAT, "float"); }
void MpiCommunicator::allreduce_sum(double* data, std::size_t n) { allreduce(data, n, MPI_DOUBLE, "double"); }
void MpiCommunicator::allreduce_sum(int64_t* data, std::size_t n) { allreduce(data, n, MPI_INT64_T, "int64"); }

void MpiCommunicator::start_allreduce_sum(float* data, std::size_t n) {
  check(!pending_guard_, "allreduce_sum: a non-blocking sum started before the previous one completed");
  if (size_ == 1 || n == 0) return;
  const AllreduceAlgorithm a = algorithm_for(n * sizeof(float));
  if (a == AllreduceAlgorithm::Mpi && n > std::size_t(INT_MAX)) {
    // MPI counts are int: the base class defers the sum to wait_allreduce(), where allreduce() runs it
    // in pieces under its own watchdog guard.
    Communicator::start_allreduce_sum(data, n);
    return;
  }
  if (a == AllreduceAlgorithm::Ring) return start_ring(data, n, RingPhase::AllReduce, "allreduce_sum (overlapped)");
  pending_algorithm_ = a;
  pending_guard_.emplace(watchdog_->arm("allreduce_sum (overlapped)", "float", n, allreduce_name(a)));
  if (a == AllreduceAlgorithm::Mpi) {
    ++library_sums_;
    MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, comm_, &pending_mpi_);
  } else {
    scheduled(a).start(data, n);
  }
}

Communicator::Traffic MpiCommunicator::traffic() const {
  Traffic t;
  t.library_sums = library_sums_;
  if (ring_) t.bytes_sent += ring_->bytes_sent();
  if (hd_) t.bytes_sent += hd_->bytes_sent();
  if (rd_) t.bytes_sent += rd_->bytes_sent();
  if (hier_) t.bytes_sent += hier_->bytes_sent();
  return t;
}

// The ring, whole or one of its phases (those two whatever --allreduce says: only the ring has them).
void MpiCommunicator::start_ring(float* data, std::size_t n, RingPhase phase, const char* what) {
  check(!pending_guard_, std::string(what) + ": started before the previous non-blocking operation completed");
  if (size_ == 1 || n == 0) return;
  pending_algorithm_ = AllreduceAlgorithm::Ring;
  pending_guard_.emplace(watchdog_->arm(what, "float", n, "ring"));
  ring_->start(data, n, phase);
}

void MpiCommunicator::start_reduce_scatter_sum(float* data, std::size_t n) {
  start_ring(data, n, RingPhase::ReduceScatter, "reduce_scatter_sum (overlapped)");
}

void MpiCommunicator::start_all_gather(float* data, std::size_t n) { start_ring(data, n, RingPhase::AllGather, "all_gather"); }

Communicator::Range MpiCommunicator::shard_chunk(std::size_t n) const {
  const int c = ring_reduced_chunk(rank_, size_);
  return {ring_chunk_begin(n, size_, c), ring_chunk_begin(n, size_, c + 1)};
}

bool MpiCommunicator::test_allreduce() {
  if (!pending_guard_) return Communicator::test_allreduce();
  bool done = false;
  if (pending_algorithm_ == AllreduceAlgorithm::Ring) {
    done = ring_->progress();
  } else if (pending_algorithm_ == AllreduceAlgorithm::Mpi) {
    int flag = 0;
    MPI_Test(&pending_mpi_, &flag, MPI_STATUS_IGNORE);
    done = flag != 0;
  } else {
    done = scheduled(pending_algorithm_).progress();
  }
  if (done) pending_guard_.reset();
  return done;
}

void MpiCommunicator::wait_allreduce() {
  if (!pending_guard_) return Communicator::wait_allreduce();
  if (pending_algorithm_ == AllreduceAlgorithm::Ring) ring_->finish();
  else if (pending_algorithm_ == AllreduceAlgorithm::Mpi) wait_request(&pending_mpi_);
  else scheduled(pending_algorithm_).finish();
  pending_guard_.reset();
}

void MpiCommunicator::broadcast(void* data, std::size_t bytes, int root) {
  check(root >= 0 && root < size_, "broadcast: root " + std::to_string(root) + " is not a rank");
  if (size_ == 1 || bytes == 0) return;
  auto guard = watchdog_->arm("broadcast", "byte", bytes, "");
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t done = 0; done < bytes;) {
    int count = int(std::min<std::size_t>(bytes - done, INT_MAX));
    MPI_Bcast(p + done, count, MPI_BYTE, root, comm_);
    done += std::size_t(count);
  }
}

void MpiCommunicator::barrier() {
  if (size_ == 1) return;
  auto guard = watchdog_->arm("barrier");
  MPI_Barrier(comm_);
}

std::unique_ptr<Communicator> MpiCommunicator::duplicate() {
  auto guard = watchdog_->arm("duplicate");
  return std::unique_ptr<Communicator>(new MpiCommunicator(comm_, opt_, watchdog_));
}

Communicator::Request MpiCommunicator::start_p2p(void* data, std::size_t bytes, int peer, int tag, const char* what,
                                                 bool send) {
  check(peer >= 0 && peer < size_ && peer != rank_,
        std::string(what) + ": peer " + std::to_string(peer) + " is not another rank of this group of " +
            std::to_string(size_));
  check(bytes <= std::size_t(INT_MAX), std::string(what) + ": " + std::to_string(bytes) + " bytes is more than one MPI message holds");
  std::size_t r = 0;
  while (r < p2p_.size() && p2p_[r].used) ++r;
  if (r == p2p_.size()) p2p_.emplace_back();
  P2p& p = p2p_[r];
  p = P2p{MPI_REQUEST_NULL, what, bytes, peer, true};
  if (send)
    MPI_Isend(data, int(bytes), MPI_BYTE, peer, tag, p2p_comm_, &p.request);
  else
    MPI_Irecv(data, int(bytes), MPI_BYTE, peer, tag, p2p_comm_, &p.request);
  return Request(r);
}

Communicator::Request MpiCommunicator::start_send(const void* data, std::size_t bytes, int peer, int tag,
                                                  const char* what) {
  return start_p2p(const_cast<void*>(data), bytes, peer, tag, what, true);
}

Communicator::Request MpiCommunicator::start_recv(void* data, std::size_t bytes, int peer, int tag, const char* what) {
  return start_p2p(data, bytes, peer, tag, what, false);
}

MpiCommunicator::P2p& MpiCommunicator::p2p_slot(Request r) {
  check(r >= 0 && std::size_t(r) < p2p_.size() && p2p_[std::size_t(r)].used,
        "point-to-point: request " + std::to_string(r) + " is not in flight");
  return p2p_[std::size_t(r)];
}

bool MpiCommunicator::test_p2p(Request r) {
  P2p& p = p2p_slot(r);
  int flag = 0;
  MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
  if (flag) p.used = false;
  return flag != 0;
}

void MpiCommunicator::wait_p2p(Request r) {
  P2p& p = p2p_slot(r);
  {
    auto guard = watchdog_->arm_p2p(p.what, p.bytes, p.peer, world_ranks_[std::size_t(p.peer)]);
    wait_request(&p.request);
  }
  p.used = false;
}

}  // namespace ringtrain::dist
