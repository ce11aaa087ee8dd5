#include "ringtrain/dist/hierarchical_allreduce.h"

#include <cstring>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/halving_doubling.h"
#include "ringtrain/dist/ring_allreduce.h"

namespace ringtrain::dist {

namespace {
// The ranks of comm on this rank's host: the same MPI_Get_processor_name, colour = the first such rank.
MPI_Comm split_by_host_name(MPI_Comm comm, const RankIn& me) {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all(std::size_t(me.size) * MPI_MAX_PROCESSOR_NAME);
  int len = 0;
  MPI_Get_processor_name(mine.data(), &len);
  MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  int color = me.rank;
  for (int r = 0; r < me.size; ++r)
    if (std::memcmp(all.data() + std::size_t(r) * MPI_MAX_PROCESSOR_NAME, mine.data(), MPI_MAX_PROCESSOR_NAME) == 0) {
      color = r;
      break;
    }
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split(comm, color, me.rank, &local);
  return local;
}
}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm, int ranks_per_host) {
  check(ranks_per_host >= 0, "hierarchical all-reduce: ranks per host must be >= 0");
  const RankIn world = rank_in(comm);
  if (ranks_per_host > 0) MPI_Comm_split(comm, world.rank / ranks_per_host, world.rank, &local_);
  else local_ = split_by_host_name(comm, world);
  local_me_ = rank_in(local_);
  int is_first = local_me_.rank == 0 ? 1 : 0;
  MPI_Allreduce(&is_first, &hosts_, 1, MPI_INT, MPI_SUM, comm);
  MPI_Allreduce(&local_me_.size, &C_, 1, MPI_INT, MPI_MIN, comm);
  MPI_Comm_split(comm, local_me_.rank < C_ ? local_me_.rank : MPI_UNDEFINED, world.rank, &cross_);
  if (cross_ != MPI_COMM_NULL) cross_me_ = rank_in(cross_);
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
}

std::vector<Step> HierarchicalAllreduce::plan(std::size_t n) const {
  std::vector<Step> steps;
  const int l = local_me_.rank, L = local_me_.size, C = C_;
  if (n == 0 || (L == 1 && hosts_ == 1)) return steps;
  auto chunk = [&](int c) {  // [begin, end) of chunk c mod C
    c = ((c % C) + C) % C;
    return std::pair{ring_chunk_begin(n, C, c), ring_chunk_begin(n, C, c + 1)};
  };
  if (l >= C) {  // folded in: hand the vector over, get the result back
    Step give, take;
    give.send = {local_, l % C, 0, n};
    take.recv = {local_, l % C, 0, n};
    steps.push_back(give);
    steps.push_back(take);
    return steps;
  }
  for (int e = l + C; e < L; e += C) {
    Step s;
    s.recv = {local_, e, 0, n};
    s.reduce = true;
    steps.push_back(s);
  }
  const int next = (l + 1) % C, prev = (l + C - 1) % C;
  for (int t = 0; t < C - 1; ++t) {  // reduce-scatter around the host
    const auto [sb, se] = chunk(l - t);
    const auto [rb, re] = chunk(l - t - 1);
    Step s;
    s.send = {local_, next, sb, se - sb};
    s.recv = {local_, prev, rb, re - rb};
    s.reduce = true;
    steps.push_back(s);
  }
  const auto [ob, oe] = chunk(l + 1);
  append_halving_doubling(steps, cross_me_, ob, oe - ob);  // between hosts
  for (int t = 0; t < C - 1; ++t) {  // all-gather around the host
    const auto [sb, se] = chunk(l + 1 - t);
    const auto [rb, re] = chunk(l - t);
    Step s;
    s.send = {local_, next, sb, se - sb};
    s.recv = {local_, prev, rb, re - rb};
    steps.push_back(s);
  }
  for (int e = l + C; e < L; e += C) {
    Step s;
    s.send = {local_, e, 0, n};
    steps.push_back(s);
  }
  return steps;
}

}  // namespace ringtrain::dist
