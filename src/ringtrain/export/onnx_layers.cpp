#include "ringtrain/export/onnx_layers.h"

#include <cmath>

#include "ringtrain/core/error.h"

namespace ringtrain::onnx_export {

namespace {

using Kind = nn::LayerDescription::Kind;
using Ints = std::vector<int64_t>;

// The layer's i-th parameter as an initializer under its checkpoint name and shape.
std::string param(OnnxGraph& g, const LayerInput& in, int i) {
  const nn::ParamView& v = in.params.views()[std::size_t(in.layer.param_indices()[std::size_t(i)])];
  return g.initializer(v.name, v.shape, in.params.params() + v.offset);
}

// An F32 buffer (batch norm's running statistics) under its checkpoint name.
std::string buffer(OnnxGraph& g, const LayerInput& in, int index) {
  const nn::BufferView& v = in.params.buffer_views()[std::size_t(index)];
  return g.initializer(v.name, v.shape, in.params.buffers() + v.offset);
}

// Names inside a layer: "<layer>/<what>"; the layer's output is "<layer>/out".
std::string local(const LayerInput& in, const std::string& what) { return in.layer.name() + "/" + what; }
std::string out_name(const LayerInput& in) { return local(in, "out"); }

// A Reshape of x to [-1, dims...] (the batch first, whatever it is), written to `output` (default: the
// layer's value `what`).
std::string reshape(OnnxGraph& g, const LayerInput& in, const std::string& x, Ints dims, const std::string& what,
                    const std::string& output = "") {
  dims.insert(dims.begin(), -1);
  return g.node("Reshape", {x, g.ints(local(in, what + "_shape"), dims)}, output.empty() ? local(in, what) : output);
}

// A linear map on the rows of x [M, I]: Gemm with the [O, I] weight as stored (transB), so the initializer
// keeps the checkpoint's name and layout.
std::string gemm(OnnxGraph& g, const std::string& x, const std::string& w, const std::string& b, const std::string& out) {
  return g.node("Gemm", {x, w, b}, out, {{"transB", int64_t(1)}});
}

std::vector<Attr> conv_attrs(const nn::LayerDescription& d) {
  const int64_t k = d.kernel, s = d.stride, p = d.pad;
  return {{"kernel_shape", Ints{k, k}}, {"strides", Ints{s, s}}, {"pads", Ints{p, p, p, p}},
          {"dilations", Ints{1, 1}}, {"group", int64_t(d.groups)}};
}

std::string conv2d(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d, const std::string& out) {
  std::vector<std::string> inputs = {in.values[0], param(g, in, 0)};
  if (in.layer.param_indices().size() > 1) inputs.push_back(param(g, in, 1));
  return g.node("Conv", inputs, out, conv_attrs(d));
}

std::string conv_relu_pool(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const std::string conv = conv2d(g, in, d, local(in, "conv"));
  const std::string relu = g.node("Relu", {conv}, local(in, "relu"));
  return g.node("MaxPool", {relu}, out_name(in), {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
}

std::string max_pool(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const int64_t k = d.kernel, s = d.stride, p = d.pad;
  return g.node("MaxPool", {in.values[0]}, out_name(in),
                {{"kernel_shape", Ints{k, k}}, {"strides", Ints{s, s}}, {"pads", Ints{p, p, p, p}}});
}

// nn::Linear flattens [C, H, W] (torch.flatten(x, 1) order) before the product.
std::string linear(OnnxGraph& g, const LayerInput& in) {
  std::string x = in.values[0];
  if (in.shapes[0].size() > 1) x = g.node("Flatten", {x}, local(in, "flat"), {{"axis", int64_t(1)}});
  return gemm(g, x, param(g, in, 0), param(g, in, 1), out_name(in));
}

// nn.Linear on every row of the last dimension: [N, ..., I] -> [N * rows, I] -> Gemm -> [N, ..., O].
std::string token_linear(OnnxGraph& g, const LayerInput& in) {
  const int64_t features = in.shapes[0].back();
  const std::string rows = reshape(g, in, in.values[0], {features}, "rows");
  const std::string y = gemm(g, rows, param(g, in, 0), param(g, in, 1), local(in, "gemm"));
  return reshape(g, in, y, in.out_shape, "tokens", out_name(in));
}

// min(relu(x), 6) with the 6 as a tensor of x's shape (x * 0 + 6: exact for finite x), because OpenCV 4.6
// maps Min only between two computed tensors and Clip only in its opset-6 form (attributes, one input).
std::string relu6(OnnxGraph& g, const LayerInput& in, const std::string& x) {
  const std::string relu = g.node("Relu", {x}, local(in, "relu"));
  const std::string zero = g.node("Mul", {x, g.scalar(0.0f)}, local(in, "zeros"));
  const std::string six = g.node("Add", {zero, g.scalar(6.0f)}, local(in, "sixes"));
  return g.node("Min", {relu, six}, out_name(in));
}

// BatchNormalization, then the fused activation if any (the layer's output is the activation's).
std::string batch_norm(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const bool fused = d.fused_activation != Kind::Unsupported;
  const std::string bn = g.node("BatchNormalization",
                                {in.values[0], param(g, in, 0), param(g, in, 1), buffer(g, in, d.buffers.at(0)),
                                 buffer(g, in, d.buffers.at(1))},
                                fused ? local(in, "bn") : out_name(in), {{"epsilon", float(d.eps)}});
  if (d.fused_activation == Kind::ReLU) return g.node("Relu", {bn}, out_name(in));
  if (d.fused_activation == Kind::ReLU6) return relu6(g, in, bn);
  return bn;
}

// Exact GELU: x * (1 + erf(x / sqrt(2))) * 0.5, PyTorch's own spelling at opset 13.
std::string gelu(OnnxGraph& g, const LayerInput& in) {
  const std::string& x = in.values[0];
  const std::string scaled = g.node("Div", {x, g.scalar(float(M_SQRT2))}, local(in, "scaled"));
  const std::string erf = g.node("Erf", {scaled}, local(in, "erf"));
  const std::string cdf2 = g.node("Add", {erf, g.scalar(1.0f)}, local(in, "one_plus_erf"));
  const std::string prod = g.node("Mul", {x, cdf2}, local(in, "x_times"));
  return g.node("Mul", {prod, g.scalar(0.5f)}, out_name(in));
}

// LayerNorm over the last dimension D, decomposed for opset 13 (LayerNormalization is opset 17) on the rows
// [N * T, D]: mean and biased variance as products with the constant D x D matrix of 1/D (every column the
// row mean; OpenCV 4.6 runs this as an inner product, its ReduceMean fails here), then (x - mean) /
// sqrt(var + eps) * weight + bias, weight and bias [D] broadcast over the rows.
std::string layer_norm(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const int64_t D = in.shapes[0].back();
  const std::string averaging = g.shared("layer_norm.mean_matrix_" + std::to_string(D), {D, D}, [&] {
    return std::vector<float>(std::size_t(D * D), float(1.0 / double(D)));
  });
  const std::string rows = reshape(g, in, in.values[0], {D}, "rows");
  const std::string mean = g.node("MatMul", {rows, averaging}, local(in, "mean"));
  const std::string centred = g.node("Sub", {rows, mean}, local(in, "centred"));
  const std::string squared = g.node("Mul", {centred, centred}, local(in, "squared"));
  const std::string var = g.node("MatMul", {squared, averaging}, local(in, "var"));
  const std::string var_eps = g.node("Add", {var, g.scalar(float(d.eps))}, local(in, "var_eps"));
  const std::string stddev = g.node("Sqrt", {var_eps}, local(in, "std"));
  const std::string normed = g.node("Div", {centred, stddev}, local(in, "normed"));
  const std::string scaled = g.node("Mul", {normed, param(g, in, 0)}, local(in, "scaled"));
  const std::string shifted = g.node("Add", {scaled, param(g, in, 1)}, local(in, "shifted"));
  return reshape(g, in, shifted, in.out_shape, "tokens", out_name(in));
}

// torch.nn.MultiheadAttention(x, x, x) without mask or dropout, [N, T, D] -> [N, T, D]: the packed q | k | v
// projection as one Gemm on the rows, split, heads as [N, H, T, D/H], softmax(q k^T / sqrt(D/H)) v, the
// heads back to rows, out_proj.
std::string self_attention(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const int64_t T = in.shapes[0][0], D = in.shapes[0][1], H = d.heads, hd = D / H;
  const std::string rows = reshape(g, in, in.values[0], {D}, "rows");
  const std::string qkv_rows = gemm(g, rows, param(g, in, 0), param(g, in, 1), local(in, "qkv_rows"));
  const std::string qkv = reshape(g, in, qkv_rows, {T, 3 * D}, "qkv");
  const std::string q = local(in, "q"), k = local(in, "k"), v = local(in, "v");
  g.node("Split", {qkv, g.ints(local(in, "split_sizes"), {D, D, D})}, std::vector<std::string>{q, k, v},
         {{"axis", int64_t(2)}});
  auto heads = [&](const std::string& x, const std::string& what, Ints perm) {
    const std::string split = reshape(g, in, x, {T, H, hd}, what + "_heads");
    return g.node("Transpose", {split}, local(in, what + "_t"), {{"perm", perm}});
  };
  const std::string qh = heads(q, "q", {0, 2, 1, 3});  // [N, H, T, hd]
  const std::string kt = heads(k, "k", {0, 2, 3, 1});  // [N, H, hd, T]
  const std::string vh = heads(v, "v", {0, 2, 1, 3});  // [N, H, T, hd]
  // q / sqrt(hd) before the product, as PyTorch does: OpenCV 4.6 fuses a scaling after a MatMul of two
  // computed tensors into it wrongly (its results differ unless the fusion is off).
  const std::string q_scaled = g.node("Mul", {qh, g.scalar(float(1.0 / std::sqrt(double(hd))))}, local(in, "q_scaled"));
  const std::string scores = g.node("MatMul", {q_scaled, kt}, local(in, "scores"));
  const std::string probs = g.node("Softmax", {scores}, local(in, "probs"), {{"axis", int64_t(-1)}});
  const std::string ctx = g.node("MatMul", {probs, vh}, local(in, "context"));  // [N, H, T, hd]
  const std::string ctx_t = g.node("Transpose", {ctx}, local(in, "context_t"), {{"perm", Ints{0, 2, 1, 3}}});
  const std::string ctx_rows = reshape(g, in, ctx_t, {D}, "context_rows");
  const std::string y = gemm(g, ctx_rows, param(g, in, 2), param(g, in, 3), local(in, "out_rows"));
  return reshape(g, in, y, {T, D}, "tokens", out_name(in));
}

// [N, D, h, w] -> [N, h*w, D] (x.reshape(n, D, h*w).permute(0, 2, 1)).
std::string patch_tokens(OnnxGraph& g, const LayerInput& in) {
  const Shape& s = in.shapes[0];
  const std::string flat = reshape(g, in, in.values[0], {s[0], s[1] * s[2]}, "flat");
  return g.node("Transpose", {flat}, out_name(in), {{"perm", Ints{0, 2, 1}}});
}

// nn::PatchEmbedding: the conv, then its [D, h, w] output as h*w tokens of D.
std::string patch_embedding(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const int64_t T = in.out_shape[0], D = in.out_shape[1];
  const std::string conv = conv2d(g, in, d, local(in, "conv"));
  const std::string flat = reshape(g, in, conv, {D, T}, "flat");
  return g.node("Transpose", {flat}, out_name(in), {{"perm", Ints{0, 2, 1}}});
}

// The class token in front of the tokens: x[:, :1] * 0 + token is the token repeated for every sample of the
// batch, whatever N is (OpenCV 4.6 rejects Expand to a computed shape); the [1, 1, D] parameter is reshaped
// to [1, D] so OpenCV adds it as a per-row constant.
std::string class_token(OnnxGraph& g, const LayerInput& in) {
  const std::string& x = in.values[0];
  const int64_t D = in.shapes[0][1];
  const std::string first = g.node("Slice", {x, g.ints(local(in, "starts"), {0}), g.ints(local(in, "ends"), {1}),
                                            g.ints(local(in, "axes"), {1})},
                                   local(in, "first"));
  const std::string zeros = g.node("Mul", {first, g.scalar(0.0f)}, local(in, "zeros"));
  const std::string token = g.node("Reshape", {param(g, in, 0), g.ints(local(in, "token_shape"), {1, D})},
                                   local(in, "token"));
  const std::string tokens = g.node("Add", {zeros, token}, local(in, "tokens"));
  return g.node("Concat", {tokens, x}, out_name(in), {{"axis", int64_t(1)}});
}

// x + pos, the [1, T, D] parameter reshaped to [T, D] (the same broadcast; OpenCV 4.6 adds a constant whose
// shape is x's with batch 1 as if the batch were 1).
std::string position_embedding(OnnxGraph& g, const LayerInput& in) {
  const Shape& s = in.shapes[0];
  const std::string pos = g.node("Reshape", {param(g, in, 0), g.ints(local(in, "pos_shape"), {s[0], s[1]})},
                                 local(in, "pos"));
  return g.node("Add", {in.values[0], pos}, out_name(in));
}

// x[:, index]: a one-token Slice flattened to [N, D] (OpenCV 4.6's Gather keeps the sliced axis).
std::string select_token(OnnxGraph& g, const LayerInput& in, const nn::LayerDescription& d) {
  const int64_t i = d.index;
  const std::string token = g.node("Slice", {in.values[0], g.ints(local(in, "starts"), {i}),
                                             g.ints(local(in, "ends"), {i + 1}), g.ints(local(in, "axes"), {1})},
                                   local(in, "token"));
  return g.node("Flatten", {token}, out_name(in), {{"axis", int64_t(1)}});
}

}  // namespace

std::string emit_layer(OnnxGraph& g, const LayerInput& in) {
  const nn::LayerDescription d = in.layer.describe();
  switch (d.kind) {
    case Kind::Conv2d: return conv2d(g, in, d, out_name(in));
    case Kind::Conv2dReluPool: return conv_relu_pool(g, in, d);
    case Kind::Linear: return linear(g, in);
    case Kind::TokenLinear: return token_linear(g, in);
    case Kind::ReLU: return g.node("Relu", {in.values[0]}, out_name(in));
    case Kind::ReLU6: return relu6(g, in, in.values[0]);
    case Kind::GELU: return gelu(g, in);
    case Kind::MaxPool2d: return max_pool(g, in, d);
    case Kind::BatchNorm2d: return batch_norm(g, in, d);
    case Kind::LayerNorm: return layer_norm(g, in, d);
    case Kind::GlobalAveragePool: return g.node("GlobalAveragePool", {in.values[0]}, out_name(in));
    case Kind::Add: return g.node("Add", {in.values[0], in.values[1]}, out_name(in));
    case Kind::Dropout: return in.values[0];  // the identity in eval mode: no node
    case Kind::Flatten: return g.node("Flatten", {in.values[0]}, out_name(in), {{"axis", int64_t(1)}});
    case Kind::SelfAttention: return self_attention(g, in, d);
    case Kind::PatchTokens: return patch_tokens(g, in);
    case Kind::PatchEmbedding: return patch_embedding(g, in, d);
    case Kind::ClassToken: return class_token(g, in);
    case Kind::PositionEmbedding: return position_embedding(g, in);
    case Kind::SelectToken: return select_token(g, in, d);
    case Kind::Unsupported: break;
  }
  throw Error("ONNX export: layer '" + in.layer.name() + "' has no ONNX mapping");
}

}  // namespace ringtrain::onnx_export
