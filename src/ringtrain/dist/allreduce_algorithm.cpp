#include "ringtrain/dist/allreduce_algorithm.h"

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

namespace {
struct Named {
  AllreduceAlgorithm algorithm;
  const char* name;
};
constexpr Named kNames[] = {{AllreduceAlgorithm::Ring, "ring"},
                            {AllreduceAlgorithm::HalvingDoubling, "hd"},
                            {AllreduceAlgorithm::RecursiveDoubling, "rd"},
                            {AllreduceAlgorithm::Hierarchical, "hier"},
                            {AllreduceAlgorithm::Mpi, "mpi"},
                            {AllreduceAlgorithm::Auto, "auto"}};
}  // namespace

AllreduceAlgorithm parse_allreduce(const std::string& name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.algorithm;
  throw Error("--allreduce: expected ring, hd, rd, hier, mpi or auto, got '" + name + "'");
}

const char* allreduce_name(AllreduceAlgorithm a) {
  for (const Named& n : kNames)
    if (a == n.algorithm) return n.name;
  return "unknown";
}

const std::vector<AllreduceAlgorithm>& concrete_allreduce_algorithms() {
  static const std::vector<AllreduceAlgorithm> all = {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
                                                      AllreduceAlgorithm::RecursiveDoubling,
                                                      AllreduceAlgorithm::Hierarchical, AllreduceAlgorithm::Mpi};
  return all;
}

}  // namespace ringtrain::dist
