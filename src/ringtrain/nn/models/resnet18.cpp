// resnet18: torchvision 0.14's ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10) with a 1-channel 7x7
// stem. Per-sample shapes for 1x28x28: stem 64x14x14, max-pool 64x7x7, layer1 64x7x7, layer2 128x4x4,
// layer3 256x2x2, layer4 512x1x1, average pool 512, fc 10. 11.17M parameters.
#include <cmath>

#include "ringtrain/nn/activation.h"
#include "ringtrain/nn/batch_norm.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/elementwise.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/pool.h"

namespace ringtrain::nn {

namespace {

// torchvision's ResNet init for every conv but the replaced stem: kaiming_normal_(mode="fan_out",
// nonlinearity="relu"), std = sqrt(2 / (out_channels * kernel^2)).
Init kaiming_fan_out(int out_channels, int kernel) {
  return Init::normal(std::sqrt(2.0 / (double(out_channels) * kernel * kernel)));
}

std::unique_ptr<Conv2d> conv(const std::string& name, int in, int out, int kernel, int stride, int pad) {
  return std::make_unique<Conv2d>(name, in, out, kernel, stride, pad, 1, false, kaiming_fan_out(out, kernel));
}

// Batch norm "<name>" with the ReLU after it fused in (the ReLU has no parameters: torchvision's
// checkpoint names are the same).
std::unique_ptr<BatchNorm2d> bn_relu(const std::string& name, int channels) {
  return std::make_unique<BatchNorm2d>(name, channels, 1e-5, 0.1, ops::BnActivation::Relu);
}

// BasicBlock: conv3x3(stride) -> bn -> relu (fused into the bn) -> conv3x3 -> bn, plus the identity (or a
// 1x1 conv + bn when the shape changes), then relu. Returns the block's output value.
int basic_block(GraphBuilder& g, const std::string& name, int x, int in, int out, int stride) {
  int y = g.add(conv(name + ".conv1", in, out, 3, stride, 1), {x});
  y = g.add(bn_relu(name + ".bn1", out));
  y = g.add(conv(name + ".conv2", out, out, 3, 1, 1));
  y = g.add(std::make_unique<BatchNorm2d>(name + ".bn2", out));
  int identity = x;
  if (stride != 1 || in != out) {
    identity = g.add(conv(name + ".downsample.0", in, out, 1, stride, 0), {x});
    identity = g.add(std::make_unique<BatchNorm2d>(name + ".downsample.1", out));
  }
  g.add(std::make_unique<Add>(name + ".add"), {y, identity});
  return g.add(std::make_unique<ReLU>(name + ".relu2"));
}

}  // namespace

std::unique_ptr<Model> make_resnet18() {
  GraphBuilder g({1, 28, 28});
  g.add(std::make_unique<Conv2d>("conv1", 1, 64, 7, 2, 3, 1, false));  // replaced stem: nn.Conv2d's default init
  g.add(bn_relu("bn1", 64));  // and torchvision's "relu"
  int x = g.add(std::make_unique<MaxPool2d>("maxpool", 3, 2, 1));
  const int widths[4] = {64, 128, 256, 512};
  int in = 64;
  for (int l = 0; l < 4; ++l) {
    const std::string layer = "layer" + std::to_string(l + 1);
    x = basic_block(g, layer + ".0", x, in, widths[l], l == 0 ? 1 : 2);
    x = basic_block(g, layer + ".1", x, widths[l], widths[l], 1);
    in = widths[l];
  }
  g.add(std::make_unique<AdaptiveAvgPool2d>("avgpool"));
  g.add(std::make_unique<Linear>("fc", 512, 10));  // nn.Linear's default init
  auto model = g.build();
  model->set_name("resnet18");
  return model;
}

}  // namespace ringtrain::nn
