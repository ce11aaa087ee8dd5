// LeNet-5 as DESIGN.md fixes it: 1x28x28 -> conv1 1->6 k5 pad2 -> ReLU -> maxpool2 -> conv2 6->16 k5
// -> ReLU -> maxpool2 -> flatten 400 -> fc1 120 -> ReLU -> fc2 84 -> ReLU -> fc3 10. 61,706 parameters.
#pragma once
#include <memory>

#include "ringtrain/nn/model.h"

namespace ringtrain::nn {

constexpr int kLeNet5Parameters = 61706;

std::unique_ptr<Model> make_lenet5();

// LeNet-5 with its fully connected layers split over a tensor-parallel group (nn/parallel_linear.h):
// fc1 column-parallel (120 outputs cut), relu3 on the shard, fc2 row-parallel (its 120 inputs cut the
// same way), fc3 whole on every rank (10x84: too small to be worth a gather). With T ranks each holds
// about 1/T of fc1 and fc2. Same parameter names as make_lenet5(); views hold the shards. tp must
// outlive the model.
class TensorGroup;
std::unique_ptr<Model> make_lenet5_tp(TensorGroup& tp);

}  // namespace ringtrain::nn
