// Hierarchical all-reduce: first inside each host, then between hosts, then inside each host again, so
// the slow links between hosts carry 1/C of the buffer per rank instead of the whole ring's traffic.
//
// Hosts are the ranks with the same MPI_Get_processor_name (the host name), or rank / ranks_per_host when
// that is given (an artificial split, so tests and benchmarks on one machine exercise the path between
// hosts). Not MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): it takes the launcher's idea of locality, which
// for the emulated hosts of tests/net (namespaces sharing one kernel) deadlocked Open MPI 4.1 in the split
// itself with 2 ranks a host (reproduced with a 15-line C program); the host name is what a hostfile names.
// C = the smallest host's rank count. On each host, local ranks l >= C first send their vector to local
// rank l mod C, which adds them in order of l (hosts may be uneven); the C ranks then
//   1. reduce-scatter around the host's ring: C-1 steps, after which local rank l holds chunk (l+1) mod C
//      of the host's sum (chunk c as RingAllreduce cuts it: [c n/C, (c+1) n/C)), summed as the left fold
//      from local rank c: ((y_c + y_{c+1}) + ...);
//   2. all-reduce that chunk between the hosts with halving-doubling (halving_doubling.h), over the
//      communicator of local rank l on every host (one leader per slice index, hosts in world-rank order);
//   3. all-gather around the host's ring, and send the result to the ranks folded in.
// Every step is fixed, so every rank gets the same bits (tests/mpi/test_allreduce_algorithms.cpp).
#pragma once
#include <mpi.h>

#include "ringtrain/dist/step_schedule.h"

namespace ringtrain::dist {

class HierarchicalAllreduce final : public ScheduledAllreduce {
 public:
  // Collective over comm (splits it); comm is borrowed. ranks_per_host 0: hosts by host name.
  explicit HierarchicalAllreduce(MPI_Comm comm, int ranks_per_host = 0);
  ~HierarchicalAllreduce() override;
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;
  int hosts() const { return hosts_; }
  int slices() const { return C_; }  // the C ranks a host reduces with

 protected:
  std::vector<Step> plan(std::size_t n) const override;

 private:
  MPI_Comm local_ = MPI_COMM_NULL, cross_ = MPI_COMM_NULL;  // cross_: null on a folded-in rank
  RankIn local_me_{MPI_COMM_NULL, 0, 1}, cross_me_{MPI_COMM_NULL, 0, 1};
  int C_ = 1, hosts_ = 1;
};

}  // namespace ringtrain::dist
