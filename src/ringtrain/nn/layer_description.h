// LayerDescription: what a layer computes in eval mode, in neutral terms (its kind and hyper-parameters), for
// code that translates a Model into another format (src/ringtrain/export/: ONNX). Each layer describes itself
// (Layer::describe), so a translator needs no access to a layer's private members and nn/ stays free of any
// file format. Parameters are the layer's param_indices() in declaration order (weight, then bias, ...);
// the shapes are the Model's value shapes.
#pragma once
#include <vector>

namespace ringtrain::nn {

struct LayerDescription {
  enum class Kind {
    Unsupported,        // no translation (the tensor-parallel layers: export builds the whole model)
    Conv2d,             // kernel, stride, pad, groups; weight [K, C/groups, k, k], optional bias [K]
    Conv2dReluPool,     // Conv2d (groups 1, bias) -> ReLU -> 2x2 max-pool of stride 2
    Linear,             // flattens its input; weight [O, I], bias [O]
    TokenLinear,        // nn.Linear on the last dimension of [..., I]; weight [O, I], bias [O]
    ReLU,
    ReLU6,              // min(max(x, 0), 6)
    GELU,               // exact: x * (1 + erf(x / sqrt 2)) / 2
    MaxPool2d,          // kernel, stride, pad (-inf padding, floor mode)
    BatchNorm2d,        // eps; weight, bias; buffers running_mean, running_var
    LayerNorm,          // eps, over the last dimension; weight, bias
    GlobalAveragePool,  // [C, H, W] -> [C, 1, 1]
    Add,                // two inputs, same shape
    Dropout,            // the identity in eval mode
    Flatten,            // [C, H, W] -> [C*H*W]
    SelfAttention,      // heads; nn.MultiheadAttention(x, x, x): in_proj_weight [3D, D], in_proj_bias, out_proj.*
    PatchTokens,        // [D, h, w] -> [h*w, D]
    PatchEmbedding,     // Conv2d (kernel = stride, pad 0, groups 1, bias) -> PatchTokens
    ClassToken,         // [T, D] -> [T+1, D], the parameter [1, 1, D] first
    PositionEmbedding,  // [T, D] + the parameter [1, T, D]
    SelectToken,        // [T, D] -> [D], token `index`
  };
  Kind kind = Kind::Unsupported;
  int kernel = 0, stride = 1, pad = 0, groups = 1;  // Conv2d, Conv2dReluPool, MaxPool2d, PatchEmbedding
  double eps = 0.0;                                 // BatchNorm2d, LayerNorm
  int heads = 0;                                    // SelfAttention
  int index = 0;                                    // SelectToken
  std::vector<int> buffers = {};                    // BatchNorm2d: running_mean, running_var (buffer indices)
  // BatchNorm2d: ReLU or ReLU6 when one is fused after it (its output is the activation's), else Unsupported.
  Kind fused_activation = Kind::Unsupported;
};

}  // namespace ringtrain::nn
