// ProcessGrid: the world of W ranks as a 3-D grid of dp data-parallel x pp pipeline x tp tensor-parallel
// ranks (W = dp x pp x tp, `--tp T --pp P`), in Megatron-LM's order: tensor ranks fastest, then
// data-parallel, pipeline slowest. World rank w sits at tp_rank = w % tp, dp_rank = (w / tp) % dp,
// pp_rank = w / (tp dp): a tensor group is a run of tp consecutive ranks (with mpirun's default by-core
// mapping they share a machine, and their traffic - every step, on the critical path - stays local), a
// data-parallel group is every tp-th rank of one pipeline stage, a pipeline group is every (tp dp)-th rank.
// Without --pp (pp = 1) this is the 2-D grid dp x tp: tp_rank = w % tp, dp_rank = w / tp.
//
//   pipeline group (pp_comm): ranks with the same dp_rank and tp_rank, one per stage (pp_rank = the stage).
//     They see the same samples (the sampler shards by dp_rank) and pass activations forward and their
//     gradients back by point-to-point messages (train/pipeline_engine.h).
//
//   tensor group (tp_comm): ranks with the same dp_rank. They hold different shards of fc1/fc2 and see
//     the same samples (the sampler shards by dp_rank / dp), so their activations line up; the parallel
//     layers' all-reduces run here.
//   data-parallel group (dp_comm): ranks with the same tp_rank. They hold the same shards; the
//     GradReducer averages every gradient over this group only - each weight shard over the ranks that
//     hold it, the replicated layers (convolutions, fc2.bias, fc3) too.
//
// Replicated parameters stay identical across a tensor group without any traffic of their own: every
// rank of the group starts from the same whole weights (cut from one initialisation or checkpoint),
// sees the same samples, and the only values that cross into the replicated layers come out of the tensor
// group's all-reduce, which here is always our ring - it leaves the same bits on every rank (a fixed fold
// order per chunk, docs/DISTRIBUTED.md) whatever --allreduce says. Identical inputs through identical
// deterministic kernels give identical gradients, identical data-parallel averages and identical Adam
// steps. replica_mismatches() checks it (tests after every step; the trainer at the end of each epoch).
//
// The grid's communicators come from MPI_Comm_split behind the Communicator interface; a world of one
// (LocalCommunicator) gives a 1 x 1 grid of local communicators.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/nn/parallel_linear.h"
#include "ringtrain/nn/parameters.h"

namespace ringtrain::dist {

// Throws Error("--tp T does not divide the world of W ranks ...") unless T >= 1 divides W.
void check_tp(int world_size, int tp);
// The same for --pp P and --tp T together: P >= 1 and P x T divides W.
void check_grid(int world_size, int tp, int pp);

// nn::TensorGroup over a Communicator, counting what it moves (the benchmark's bytes per step; a group
// of one moves and counts nothing). The all-reduce waits by yielding the core (PollMode::Yield) unless
// told otherwise: it sits on the critical path twice a step, and under --bind-to core a spinning rank
// starves its own loader thread and, on a busy machine, the peer it waits for (bench_tp --poll: 1.9-2.5 ms
// vs 3.8-4.8 ms a tp=2 step on the shared 2-core VM).
class TensorGroupComm final : public nn::TensorGroup {
 public:
  explicit TensorGroupComm(Communicator& comm, PollMode poll = PollMode::Yield) : comm_(comm), poll_(poll) {}
  void set_poll(PollMode poll) { poll_ = poll; }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void allreduce_sum(float* data, std::size_t n) override;

  struct Stats {
    int64_t calls = 0;
    int64_t floats = 0;  // payload: elements all-reduced (each rank's buffer), summed over calls
    double seconds = 0;  // inside the all-reduce
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  Communicator& comm_;
  PollMode poll_;
  Stats stats_;
};

class ProcessGrid {
 public:
  // Collective over world. world must be a MpiCommunicator unless it has one rank. The tensor group
  // always uses the ring all-reduce (same bits on every rank, see above); the data-parallel group uses
  // opt.algorithm. Throws (check_tp) before any communication if tp does not divide the world.
  ProcessGrid(Communicator& world, int tp, const MpiOptions& opt = {}, int pp = 1);
  ~ProcessGrid();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return world_size_ / (tp_ * pp_); }
  int tp_rank() const { return world_rank_ % tp_; }
  int dp_rank() const { return (world_rank_ / tp_) % dp(); }
  int pp_rank() const { return world_rank_ / (tp_ * dp()); }
  // The world rank at (dp_rank, pp_rank, tp_rank).
  int world_rank_at(int dp_rank, int pp_rank, int tp_rank) const { return (pp_rank * dp() + dp_rank) * tp_ + tp_rank; }

  Communicator& tp_comm() { return *tp_comm_; }
  Communicator& dp_comm() { return *dp_comm_; }
  Communicator& pp_comm() { return *pp_comm_; }
  // The tensor group as the parallel layers take it (nn::make_lenet5_tp).
  TensorGroupComm& tensor_group() { return *group_; }

 private:
  int world_rank_ = 0, world_size_ = 1, tp_ = 1, pp_ = 1;
  std::unique_ptr<Communicator> tp_comm_, dp_comm_, pp_comm_;
  std::unique_ptr<TensorGroupComm> group_;
};

// Whole tensors from shards. For every view of `sharded` (a tensor-parallel model's ParameterSet), the
// view of the same name in `full` (the same model built whole, e.g. nn::make_lenet5()) receives the whole
// tensor, gathered over tp (collective over the tensor group; every rank of it ends with the whole
// tensors). src/dst are buffers laid out as the sets' parameter buffers: the parameters themselves, their
// gradients, or an optimizer state buffer. Replicated views are copied from this rank.
void gather_shards(const nn::ParameterSet& sharded, const float* src, const nn::ParameterSet& full, float* dst,
                   Communicator& tp);
// The reverse, local (no traffic): each view of `sharded` receives its shard of the same-named view of full.
void split_to_shards(const nn::ParameterSet& full, const float* src, const nn::ParameterSet& sharded, float* dst);

// Floats of the replicated (unsharded) views of buf that differ from tensor rank 0's, summed over the
// tensor group (collective over tp; 0 when the replicas agree bit for bit).
int64_t replica_mismatches(const nn::ParameterSet& params, const float* buf, Communicator& tp);

}  // namespace ringtrain::dist
