#include "ringtrain/nn/models/lenet5.h"

#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/linear.h"

namespace ringtrain::nn {

std::unique_ptr<Model> make_lenet5() {
  LayerList layers;
  layers.push_back(std::make_unique<Conv2d>("conv1", 1, 6, 5, 1, 2));
  layers.push_back(std::make_unique<ReLU>("relu1"));
  layers.push_back(std::make_unique<MaxPool2d>("pool1", 2));
  layers.push_back(std::make_unique<Conv2d>("conv2", 6, 16, 5, 1, 0));
  layers.push_back(std::make_unique<ReLU>("relu2"));
  layers.push_back(std::make_unique<MaxPool2d>("pool2", 2));
  layers.push_back(std::make_unique<Linear>("fc1", 400, 120));
  layers.push_back(std::make_unique<ReLU>("relu3"));
  layers.push_back(std::make_unique<Linear>("fc2", 120, 84));
  layers.push_back(std::make_unique<ReLU>("relu4"));
  layers.push_back(std::make_unique<Linear>("fc3", 84, 10));
  return std::make_unique<Model>(Shape{1, 28, 28}, std::move(layers));
}

}  // namespace ringtrain::nn
