// mobilenet_v2: torchvision 0.14's MobileNetV2(num_classes=10) (width 1.0) with a 1-channel stride-2
// stem. Per-sample shapes for 1x28x28: stem 32x14x14; inverted residual stages at 14x14 (16), 7x7 (24),
// 4x4 (32), 2x2 (64, 96), 1x1 (160, 320); 1x1 conv to 1280; average pool; dropout 0.2; linear 10.
#include <cmath>

#include "ringtrain/nn/batch_norm.h"
#include "ringtrain/nn/conv2d.h"
#include "ringtrain/nn/elementwise.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/pointwise.h"
#include "ringtrain/nn/pool.h"

namespace ringtrain::nn {

namespace {

// MobileNetV2's init for every conv but the replaced stem: kaiming_normal_(mode="fan_out") (gain sqrt(2)),
// std = sqrt(2 / (out_channels * kernel^2)) - depthwise included (its weight is [C, 1, k, k]).
Init kaiming_fan_out(int out_channels, int kernel) {
  return Init::normal(std::sqrt(2.0 / (double(out_channels) * kernel * kernel)));
}

// Batch norm "<name>" with torchvision's ReLU6 right after it fused in (the ReLU6 has no parameters: the
// checkpoint's names are the same).
std::unique_ptr<BatchNorm2d> bn_relu6(const std::string& name, int channels) {
  return std::make_unique<BatchNorm2d>(name, channels, 1e-5, 0.1, ops::BnActivation::Relu6);
}

// Conv2dNormActivation(in, out, kernel, stride, groups, BatchNorm2d, ReLU6): "<name>.0" conv (no bias,
// padding (kernel - 1) / 2), "<name>.1" batch norm, then ReLU6 ("<name>.2", fused into the batch norm).
void conv_bn_relu6(GraphBuilder& g, const std::string& name, int in, int out, int kernel, int stride, int groups) {
  g.add(std::make_unique<Conv2d>(name + ".0", in, out, kernel, stride, (kernel - 1) / 2, groups, false,
                                 kaiming_fan_out(out, kernel)));
  g.add(bn_relu6(name + ".1", out));
}

// InvertedResidual(in, out, stride, expand): [1x1 expand conv-bn-relu6] -> 3x3 depthwise conv-bn-relu6 ->
// 1x1 projection conv -> bn, plus the input when stride is 1 and in == out. Returns the output value.
int inverted_residual(GraphBuilder& g, const std::string& name, int x, int in, int out, int stride, int expand) {
  const int hidden = int(std::lround(double(in) * expand));
  int i = 0;  // index inside "<name>.conv"
  const std::string seq = name + ".conv.";
  if (expand != 1) conv_bn_relu6(g, seq + std::to_string(i++), in, hidden, 1, 1, 1);
  conv_bn_relu6(g, seq + std::to_string(i++), hidden, hidden, 3, stride, hidden);
  g.add(std::make_unique<Conv2d>(seq + std::to_string(i++), hidden, out, 1, 1, 0, 1, false, kaiming_fan_out(out, 1)));
  const int y = g.add(std::make_unique<BatchNorm2d>(seq + std::to_string(i++), out));
  if (stride == 1 && in == out) return g.add(std::make_unique<Add>(name + ".add"), {y, x});
  return y;
}

}  // namespace

std::unique_ptr<Model> make_mobilenet_v2() {
  GraphBuilder g({1, 28, 28});
  // features.0: the replaced stem conv keeps nn.Conv2d's default init; its batch norm the usual ones/zeros.
  g.add(std::make_unique<Conv2d>("features.0.0", 1, 32, 3, 2, 1, 1, false));
  int x = g.add(bn_relu6("features.0.1", 32));
  // (expansion t, channels c, repeats n, first stride s), torchvision's inverted_residual_setting.
  const int setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int in = 32, index = 1;
  for (const auto& [t, c, n, s] : setting)
    for (int i = 0; i < n; ++i, ++index) {
      x = inverted_residual(g, "features." + std::to_string(index), x, in, c, i == 0 ? s : 1, t);
      in = c;
    }
  conv_bn_relu6(g, "features." + std::to_string(index), in, 1280, 1, 1, 1);
  g.add(std::make_unique<AdaptiveAvgPool2d>("avgpool"));
  g.add(std::make_unique<Dropout>("classifier.0", 0.2));
  g.add(std::make_unique<Linear>("classifier.1", 1280, 10, Init::normal(0.01), Init::constant(0.0)));
  auto model = g.build();
  model->set_name("mobilenet_v2");
  return model;
}

}  // namespace ringtrain::nn
