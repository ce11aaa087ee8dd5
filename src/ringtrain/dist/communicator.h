// Communicator: the small interface every distributed piece talks through (after mlx's
// distributed group): rank, size and the collectives the trainer needs. Passed explicitly, never
// global. LocalCommunicator is the one-process world; MpiCommunicator (mpi_communicator.h) is MPI's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sum over all ranks. Every rank ends with the same bits.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  virtual void allreduce_sum(int64_t* data, std::size_t n) = 0;
  // The float sum, non-blocking: start_allreduce_sum() begins it, test_allreduce() moves it on without
  // blocking and says whether it is complete, wait_allreduce() blocks until it is. One at a time per
  // communicator, started in the same order on every rank; `data` must stay untouched until complete.
  // Same bits as allreduce_sum. This default does all the work in wait_allreduce() (no overlap);
  // MpiCommunicator overrides it with a resumable ring or MPI_Iallreduce.
  virtual void start_allreduce_sum(float* data, std::size_t n) {
    pending_data_ = data;
    pending_n_ = n;
  }
  virtual bool test_allreduce() { return pending_data_ == nullptr; }
  virtual void wait_allreduce() {
    float* data = pending_data_;
    pending_data_ = nullptr;
    if (data) allreduce_sum(data, pending_n_);
  }
  // The all-reduce's two halves, for optimizer-state sharding (ZeRO-1), non-blocking like
  // start_allreduce_sum and completed by the same test_allreduce() / wait_allreduce(). After
  // start_reduce_scatter_sum completes, this rank's chunk shard_chunk(n) holds the sum over the ranks,
  // the same bits allreduce_sum would leave there (the rest of data is scratch); start_all_gather
  // copies every rank's shard_chunk(n) to every rank. A world of one has nothing to do.
  virtual void start_reduce_scatter_sum(float* data, std::size_t n);
  virtual void start_all_gather(float* data, std::size_t n);
  // [begin, end) of this rank's chunk of an n-element buffer in those two operations.
  struct Range {
    std::size_t begin = 0, end = 0;
  };
  virtual Range shard_chunk(std::size_t n) const { return {0, size() == 1 ? n : 0}; }
  // What this communicator's sums and their phases have sent from this rank since it was made: the
  // bytes our own algorithms posted, and how many sums went to the MPI library instead, whose traffic
  // it does not tell (the trainer's "all-reduce bytes per step" says so).
  struct Traffic {
    std::uint64_t bytes_sent = 0;
    std::int64_t library_sums = 0;
  };
  virtual Traffic traffic() const { return {}; }
  // Copies root's bytes to every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // A new communicator over the same ranks whose traffic never mixes with this one's (the GradReducer's
  // buckets run on one, so their messages never match anything else's). Collective: every rank must call it.
  virtual std::unique_ptr<Communicator> duplicate() = 0;

  // Point-to-point, non-blocking (pipeline stages pass activations and their gradients): start_send /
  // start_recv begin moving `bytes` bytes to / from rank `peer` of this communicator under `tag` and return
  // a request; test_p2p() says (without blocking) whether it is complete, wait_p2p() blocks until it is and
  // frees it. `what` (a static string, e.g. "recv activations") names the transfer in the watchdog's message
  // when a wait runs past the timeout: a dead peer ends the job naming this rank, the group, the peer and
  // the operation. Messages between two ranks with one tag arrive in the order they were sent. The buffer
  // must stay untouched until the request completes. MPI's traffic here never mixes with the collectives'.
  using Request = int;
  virtual Request start_send(const void* data, std::size_t bytes, int peer, int tag, const char* what);
  virtual Request start_recv(void* data, std::size_t bytes, int peer, int tag, const char* what);
  virtual bool test_p2p(Request r);
  virtual void wait_p2p(Request r);

 private:
  float* pending_data_ = nullptr;
  std::size_t pending_n_ = 0;
};

// A world of one process: every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_sum(int64_t*, std::size_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Communicator> duplicate() override { return std::make_unique<LocalCommunicator>(); }
};

// Only a world of one (nothing to send) or a communicator that overrides them can shard.
inline void Communicator::start_reduce_scatter_sum(float*, std::size_t) {
  check(size() == 1, "this communicator has no reduce-scatter (optimizer-state sharding needs MPI's)");
}
inline void Communicator::start_all_gather(float*, std::size_t) {
  check(size() == 1, "this communicator has no all-gather (optimizer-state sharding needs MPI's)");
}

// Only MPI's communicator has peers to talk to (a world of one has none).
inline Communicator::Request Communicator::start_send(const void*, std::size_t, int peer, int, const char* what) {
  throw Error(std::string(what) + ": this communicator has no point-to-point (rank " + std::to_string(peer) +
              " of a world of " + std::to_string(size()) + ")");
}
inline Communicator::Request Communicator::start_recv(void*, std::size_t, int peer, int, const char* what) {
  throw Error(std::string(what) + ": this communicator has no point-to-point (rank " + std::to_string(peer) +
              " of a world of " + std::to_string(size()) + ")");
}
inline bool Communicator::test_p2p(Request) { throw Error("test_p2p: this communicator has no point-to-point"); }
inline void Communicator::wait_p2p(Request) { throw Error("wait_p2p: this communicator has no point-to-point"); }

}  // namespace ringtrain::dist
