// Whether the optimizer state is sharded over the data-parallel ranks (ZeRO-1, dist/grad_reducer.h) when the
// user said neither --shard-optimizer nor --no-shard-optimizer.
//
// Sharding is bit-identical to plain data parallelism on the ring (the reduce-scatter leaves each rank the
// very sums the ring's all-reduce would, and Adam is element-wise), sends the same bytes, keeps 1/W of the
// optimizer state and runs the update on 1/W of the parameters. What it gives up is --allreduce auto's
// choice per bucket: its phases always run on the ring. With exactly two data-parallel ranks that choice
// costs nothing in bits (ring, halving-doubling and recursive doubling each add the other rank's value to
// one's own, and a + b = b + a) and little in time, while the update on half the parameters gains more:
// resnet18's all-gather after the update takes ~3 ms a step on one host, the half update saves ~7 ms.
// Measured on Zen 5, 2 ranks on one host, `--bind-to core`, samples/s plain against sharded: resnet18
// 1294 / 1418 (+9.6%), mobilenet_v2 +4-5%, vit within the noise (+-3%), LeNet-5 level (docs/BENCHMARKS.md).
//
// Not by default:
//  - across hosts: the all-gather runs after the update, where nothing hides it, and on a slow link it is
//    as long as the all-reduce's second half (1 Gbit/s: ~180 ms a step for resnet18's 45 MB);
//  - three ranks or more: the algorithms then differ in their bits and their speed, which no model here
//    weighs against the optimizer's;
//  - an --allreduce the user named, or a calibration file asked for (--allreduce-calibration): the plan
//    per bucket is what the user wants to see run;
//  - 16-bit gradient traffic (its ring has no reduce-scatter).
#pragma once
#include <string>

#include "ringtrain/dist/allreduce_algorithm.h"

namespace ringtrain::train {

// What --shard-optimizer / --no-shard-optimizer (or neither) asked for.
enum class ShardRequest { Auto, On, Off };

// The facts the automatic choice reads, all known once the data-parallel group exists.
struct ShardContext {
  int dp_ranks = 1;  // ranks in this rank's data-parallel group
  int dp_hosts = 1;  // hosts those ranks run on
  dist::AllreduceAlgorithm algorithm = dist::AllreduceAlgorithm::Auto;
  bool calibration_file = false;  // --allreduce-calibration was given
  std::string grad_comm = "fp32";
};

inline bool shard_by_default(const ShardContext& c) {
  return c.dp_ranks == 2 && c.dp_hosts == 1 && c.algorithm == dist::AllreduceAlgorithm::Auto &&
         !c.calibration_file && c.grad_comm == "fp32";
}

inline bool shard_optimizer(ShardRequest request, const ShardContext& context) {
  if (request == ShardRequest::On) return true;
  if (request == ShardRequest::Off) return false;
  return shard_by_default(context);
}

}  // namespace ringtrain::train
