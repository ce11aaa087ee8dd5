#include "ringtrain/dist/process_grid.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

void check_tp(int world_size, int tp) {
  check(tp >= 1, "--tp must be at least 1, got " + std::to_string(tp));
  check(world_size % tp == 0, "--tp " + std::to_string(tp) + " does not divide the world of " +
                                  std::to_string(world_size) + " rank(s); the world is data-parallel x tensor-parallel "
                                  "ranks, so use a --tp that divides the number of ranks");
}

void check_grid(int world_size, int tp, int pp) {
  check_tp(world_size, tp);
  check(pp >= 1, "--pp must be at least 1, got " + std::to_string(pp));
  check(world_size % (pp * tp) == 0,
        "--pp " + std::to_string(pp) + (tp > 1 ? " x --tp " + std::to_string(tp) : std::string()) +
            " does not divide the world of " + std::to_string(world_size) +
            " rank(s); the world is data-parallel x pipeline x tensor-parallel ranks, so use a --pp (x --tp) that "
            "divides the number of ranks");
}

void TensorGroupComm::allreduce_sum(float* data, std::size_t n) {
  if (comm_.size() == 1) return;  // a group of one moves nothing
  const auto t0 = std::chrono::steady_clock::now();
  {
    ScopedPollMode mode(poll_);
    comm_.allreduce_sum(data, n);
  }
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.calls;
  stats_.floats += int64_t(n);
}

ProcessGrid::ProcessGrid(Communicator& world, int tp, const MpiOptions& opt, int pp)
    : world_rank_(world.rank()), world_size_(world.size()), tp_(tp), pp_(pp) {
  check_grid(world_size_, tp, pp);
  if (world_size_ == 1) {
    tp_comm_ = std::make_unique<LocalCommunicator>();
    dp_comm_ = std::make_unique<LocalCommunicator>();
    pp_comm_ = std::make_unique<LocalCommunicator>();
  } else {
    auto* mpi = dynamic_cast<MpiCommunicator*>(&world);
    check(mpi != nullptr, "process grid: a world of " + std::to_string(world_size_) + " ranks must be MPI's");
    MpiOptions tp_opt = opt, dp_opt = opt, pp_opt = opt;
    // The same bits on every rank of the tensor group, and, for a power of two, recursive doubling's pairs
    // (0+1, 2+3, then the pairs' sums): the tree one process sums vit's split layers in (nn/tp_reduction.h).
    tp_opt.algorithm = (tp & (tp - 1)) == 0 ? AllreduceAlgorithm::RecursiveDoubling : AllreduceAlgorithm::Ring;
    pp_opt.algorithm = AllreduceAlgorithm::Ring;  // its few collectives (a loss broadcast, checkpoints) need no plan
    tp_opt.group = "tensor";
    dp_opt.group = "data-parallel";
    pp_opt.group = "pipeline";
    MPI_Comm tp_split = MPI_COMM_NULL, dp_split = MPI_COMM_NULL, pp_split = MPI_COMM_NULL;
    {
      auto guard = mpi->watchdog().arm("comm_split");
      MPI_Comm_split(mpi->comm(), /*color=*/pp_rank() * dp() + dp_rank(), /*key=*/tp_rank(), &tp_split);
      MPI_Comm_split(mpi->comm(), /*color=*/pp_rank() * tp_ + tp_rank(), /*key=*/dp_rank(), &dp_split);
      MPI_Comm_split(mpi->comm(), /*color=*/dp_rank() * tp_ + tp_rank(), /*key=*/pp_rank(), &pp_split);
    }
    tp_comm_ = std::make_unique<MpiCommunicator>(tp_split, tp_opt);  // duplicates the split communicators
    dp_comm_ = std::make_unique<MpiCommunicator>(dp_split, dp_opt);
    pp_comm_ = std::make_unique<MpiCommunicator>(pp_split, pp_opt);
    MPI_Comm_free(&tp_split);
    MPI_Comm_free(&dp_split);
    MPI_Comm_free(&pp_split);
    check(tp_comm_->rank() == tp_rank() && tp_comm_->size() == tp_ && dp_comm_->rank() == dp_rank() &&
              dp_comm_->size() == dp() && pp_comm_->rank() == pp_rank() && pp_comm_->size() == pp_,
          "process grid: MPI_Comm_split gave an unexpected layout");
  }
  group_ = std::make_unique<TensorGroupComm>(*tp_comm_);
}

ProcessGrid::~ProcessGrid() = default;

namespace {
const nn::ParamView& same_name(const nn::ParameterSet& set, const nn::ParamView& v, const char* which) {
  for (const auto& w : set.views())
    if (w.name == v.name) {
      check(w.shape == v.shard.full, std::string(which) + ": '" + v.name + "' is " + shape_str(w.shape) +
                                         " there but " + shape_str(v.shard.full) + " whole here");
      return w;
    }
  throw Error(std::string(which) + ": the whole model has no parameter '" + v.name + "'");
}
}  // namespace

void gather_shards(const nn::ParameterSet& sharded, const float* src, const nn::ParameterSet& full, float* dst,
                   Communicator& tp) {
  std::vector<float> piece;
  for (const auto& v : sharded.views()) {
    const nn::ParamView& w = same_name(full, v, "gather_shards");
    if (!v.shard.sharded()) {
      std::memcpy(dst + w.offset, src + v.offset, v.numel * sizeof(float));
      continue;
    }
    check(v.shard.count() == tp.size(), "gather_shards: '" + v.name + "' is cut in " +
                                            std::to_string(v.shard.count()) + " shards, the tensor group has " +
                                            std::to_string(tp.size()) + " ranks");
    for (int r = 0; r < tp.size(); ++r) {
      const std::size_t n = std::size_t(shape_numel(v.shard.shard_shape(r)));
      piece.resize(n);
      if (r == tp.rank()) std::memcpy(piece.data(), src + v.offset, n * sizeof(float));
      tp.broadcast(piece.data(), n * sizeof(float), r);
      nn::insert_shard(v.shard, r, piece.data(), dst + w.offset);
    }
  }
}

void split_to_shards(const nn::ParameterSet& full, const float* src, const nn::ParameterSet& sharded, float* dst) {
  for (const auto& v : sharded.views()) {
    const nn::ParamView& w = same_name(full, v, "split_to_shards");
    nn::extract_shard(v.shard, v.shard.index, src + w.offset, dst + v.offset);
  }
}

int64_t replica_mismatches(const nn::ParameterSet& params, const float* buf, Communicator& tp) {
  int64_t bad = 0;
  if (tp.size() == 1) return 0;
  std::vector<float> root;
  for (const auto& v : params.views()) {
    if (v.shard.sharded()) continue;
    root.assign(buf + v.offset, buf + v.offset + v.numel);
    tp.broadcast(root.data(), root.size() * sizeof(float), 0);
    for (std::size_t i = 0; i < v.numel; ++i) bad += std::memcmp(&root[i], buf + v.offset + i, sizeof(float)) != 0;
  }
  tp.allreduce_sum(&bad, 1);
  return bad;
}

}  // namespace ringtrain::dist
