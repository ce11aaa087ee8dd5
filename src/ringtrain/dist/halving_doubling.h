// Recursive halving-doubling all-reduce (Rabenseifner's): a reduce-scatter by recursive halving, then
// an all-gather by recursive doubling, on the p = 2^floor(log2 W) ranks left after the fold of
// power_of_two_fold.h. In halving step k (mask 2^k, k = 0, 1, ...) a rank halves the range it still
// holds, keeps the lower half if bit k of its number is 0 (else the upper), sends the other half to the
// rank differing in bit k and adds what that rank sent for the kept half; the all-gather walks the same
// halvings back. 2 log2 p messages, each rank moving 2(p-1)/p of the buffer: the ring's bandwidth
// at a logarithmic latency.
//
// Fixed order: the same pairwise tree as recursive doubling (recursive_doubling.h): step k joins aligned
// groups of 2^k participants, over whatever range is being halved.
#pragma once
#include <mpi.h>

#include "ringtrain/dist/step_schedule.h"

namespace ringtrain::dist {

// Appends me's steps of a halving-doubling sum of [offset, offset+n) over me.comm.
void append_halving_doubling(std::vector<Step>& steps, const RankIn& me, std::size_t offset, std::size_t n);

class HalvingDoublingAllreduce final : public ScheduledAllreduce {
 public:
  explicit HalvingDoublingAllreduce(MPI_Comm comm) : me_(rank_in(comm)) {}  // borrowed

 protected:
  std::vector<Step> plan(std::size_t n) const override;

 private:
  RankIn me_;
};

}  // namespace ringtrain::dist
