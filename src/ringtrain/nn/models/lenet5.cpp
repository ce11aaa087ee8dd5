#include "ringtrain/nn/models/lenet5.h"

#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/conv_relu_pool.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/parallel_linear.h"

namespace ringtrain::nn {

namespace {

// LeNet-5 around the given fc1 and fc2 (plain, or split over a tensor group): the rest of the architecture
// in one place.
std::unique_ptr<Model> lenet5_with(std::unique_ptr<Layer> fc1, std::unique_ptr<Layer> fc2) {
  LayerList layers;
  // conv -> ReLU -> max-pool as one fused layer each (nn/conv_relu_pool.h): same parameters and names
  // as Conv2d, one pass over memory with the fast kernels, the reference composition with ref kernels.
  auto conv1 = std::make_unique<Conv2dReluPool>("conv1", 1, 6, 5, 1, 2);
  auto conv2 = std::make_unique<Conv2dReluPool>("conv2", 6, 16, 5, 1, 0);
  conv1->chain_to(*conv2);  // conv1's output is conv2's input only: blocked where the kernels take it
  layers.push_back(std::move(conv1));
  layers.push_back(std::move(conv2));
  layers.push_back(std::move(fc1));
  layers.push_back(std::make_unique<ReLU>("relu3"));
  layers.push_back(std::move(fc2));
  layers.push_back(std::make_unique<ReLU>("relu4"));
  layers.push_back(std::make_unique<Linear>("fc3", 84, 10));
  auto model = std::make_unique<Model>(Shape{1, 28, 28}, std::move(layers));
  model->set_name("lenet5");
  return model;
}

}  // namespace

std::unique_ptr<Model> make_lenet5() {
  return lenet5_with(std::make_unique<Linear>("fc1", 400, 120), std::make_unique<Linear>("fc2", 120, 84));
}

std::unique_ptr<Model> make_lenet5_tp(TensorGroup& tp) {
  return lenet5_with(std::make_unique<ColumnParallelLinear>("fc1", 400, 120, tp),
                     std::make_unique<RowParallelLinear>("fc2", 120, 84, tp));
}

}  // namespace ringtrain::nn
