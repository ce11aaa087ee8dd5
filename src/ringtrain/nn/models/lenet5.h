// LeNet-5 as DESIGN.md fixes it: 1x28x28 -> conv1 1->6 k5 pad2 -> ReLU -> maxpool2 -> conv2 6->16 k5
// -> ReLU -> maxpool2 -> flatten 400 -> fc1 120 -> ReLU -> fc2 84 -> ReLU -> fc3 10. 61,706 parameters.
#pragma once
#include <memory>

#include "ringtrain/nn/model.h"

namespace ringtrain::nn {

constexpr int kLeNet5Parameters = 61706;

std::unique_ptr<Model> make_lenet5();

}  // namespace ringtrain::nn
