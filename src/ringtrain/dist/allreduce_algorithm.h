// The all-reduce algorithms a MpiCommunicator can run (--allreduce), by name. Its own header so the
// cost model (allreduce_cost_model.h) and the communicator can both name them without including each other.
#pragma once
#include <string>
#include <vector>

namespace ringtrain::dist {

// Ring: RingAllreduce (ring_allreduce.h). Mpi: the library's MPI_Allreduce / MPI_Iallreduce.
// HalvingDoubling: Rabenseifner's (halving_doubling.h). RecursiveDoubling: recursive_doubling.h.
// Hierarchical: inside each host, then between hosts (hierarchical_allreduce.h).
// Auto: per message size, the cheapest of the others by a calibrated alpha-beta model (allreduce_cost_model.h).
enum class AllreduceAlgorithm { Ring, Mpi, HalvingDoubling, RecursiveDoubling, Hierarchical, Auto };
// "ring" | "hd" | "rd" | "hier" | "mpi" | "auto"; throws Error naming the option and the choices otherwise.
AllreduceAlgorithm parse_allreduce(const std::string& name);
const char* allreduce_name(AllreduceAlgorithm a);
// The algorithms auto chooses between, in the order that breaks ties in the cost model.
const std::vector<AllreduceAlgorithm>& concrete_allreduce_algorithms();

}  // namespace ringtrain::dist
