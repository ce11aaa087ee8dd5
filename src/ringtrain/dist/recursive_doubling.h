// Recursive doubling all-reduce, for small buffers: log2(p) steps, in step k (mask 2^k) every rank
// swaps its whole buffer with the rank whose number differs in bit k and adds; any W through the fold
// of power_of_two_fold.h (two more steps for the ranks that fold). Latency log2 W messages instead of
// the ring's 2(W-1), at the price of moving the whole buffer every step.
//
// Fixed order: after the fold, participant j holds v_j (x_{2j} + x_{2j+1} for j < rem, else
// x_{j+rem}); step k joins aligned groups of 2^k into groups of 2^(k+1), lower group + upper group.
// Both partners add the same two partial sums (a + b == b + a in IEEE), so every rank ends with the
// same tree: the pairwise tree over v_0..v_{p-1} (tests/mpi/test_allreduce_algorithms.cpp reproduces it).
#pragma once
#include <mpi.h>

#include "ringtrain/dist/step_schedule.h"

namespace ringtrain::dist {

// Appends me's steps of a recursive-doubling sum of [offset, offset+n) over me.comm.
void append_recursive_doubling(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n);

class RecursiveDoublingAllreduce final : public ScheduledAllreduce {
 public:
  explicit RecursiveDoublingAllreduce(MPI_Comm comm) : me_(rank_in(comm)) {}  // borrowed

 protected:
  std::vector<Step> plan(std::size_t n) const override;

 private:
  RankIn me_;
};

}  // namespace ringtrain::dist
