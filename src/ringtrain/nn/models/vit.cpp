// vit: torchvision 0.14's VisionTransformer(image_size=28, patch_size=7, num_layers=6, num_heads=4,
// hidden_dim=128, mlp_dim=512, num_classes=10) with a 1-channel patch embedding. Per sample: 16 patches of
// 7x7 -> 16 tokens of 128 (conv_proj and the permute to tokens, one layer: nn/patch_embedding.h), a class
// token in front (17 tokens), a learned position embedding, 6 pre-norm encoder blocks (x + attention(ln_1(x)),
// then x + mlp(ln_2(x)), GELU, layer norms with eps 1e-6), a final layer norm, and the head on the class token.
// Dropout is 0 in this configuration (torchvision's default), so it has no layers here.
//
// make_vit_tp splits each encoder block over a tensor group as Megatron-LM does (docs/DISTRIBUTED.md):
//   ln_1 -> f -> attention on the rank's heads (in_proj by heads, out_proj by input columns) -> g ->
//   + out_proj.bias -> + x -> ln_2 -> f -> mlp.0 column-parallel -> GELU -> mlp.3 row-parallel -> g ->
//   + mlp.3.bias -> + h
// (f, g: nn/tp_regions.h). conv_proj, the class token, the position embedding, the layer norms and the
// head stay whole on every rank.
#include <cmath>

#include "ringtrain/nn/attention.h"
#include "ringtrain/nn/elementwise.h"
#include "ringtrain/nn/layer_norm.h"
#include "ringtrain/nn/linear.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/nn/parallel_attention.h"
#include "ringtrain/nn/parallel_token_linear.h"
#include "ringtrain/nn/patch_embedding.h"
#include "ringtrain/nn/pointwise.h"
#include "ringtrain/nn/tp_reduction.h"
#include "ringtrain/nn/token_bias.h"
#include "ringtrain/nn/token_linear.h"
#include "ringtrain/nn/tp_regions.h"
#include "ringtrain/nn/vit_tokens.h"

namespace ringtrain::nn {

namespace {

constexpr int kImage = 28, kPatch = 7, kLayers = 6, kHeads = kVitHeads, kHidden = 128, kMlp = 512, kClasses = 10;
constexpr double kLayerNormEps = 1e-6;
// Attention sums head by head, the MLP in kTpChunks chunks: --tp must divide both (nn/tp_reduction.h).
static_assert(kHeads == kTpChunks, "vit's split sums: one chunk a head");

// MLPBlock's init: xavier_uniform_ weights, normal_(std=1e-6) biases.
Init mlp_weight_init(int in, int out) { return Init::uniform(std::sqrt(6.0 / double(in + out))); }
const Init kMlpBiasInit = Init::normal(1e-6);
// split: how --tp cuts it, so the whole one sums in the same order (nn/tp_reduction.h).
std::unique_ptr<TokenLinear> mlp_linear(const std::string& name, int in, int out, TpSplit split) {
  return std::make_unique<TokenLinear>(name, in, out, mlp_weight_init(in, out), kMlpBiasInit, split);
}

// Self-attention of a block on ln_1's output (the last value): whole, or split by heads over tp.
int attention(GraphBuilder& g, const std::string& name, TensorGroup* tp) {
  if (!tp) return g.add(std::make_unique<MultiheadSelfAttention>(name, kHidden, kHeads));
  g.add(std::make_unique<CopyToTensorGroup>(name + ".copy_to_tp", *tp));
  g.add(std::make_unique<HeadParallelSelfAttention>(name, kHidden, kHeads, *tp));
  g.add(std::make_unique<ReduceFromTensorGroup>(name + ".reduce_from_tp", *tp));
  return g.add(std::make_unique<TokenBias>(name + ".out_proj", kHidden, Init::constant(0.0), kHidden));
}

// MLPBlock on ln_2's output: mlp.0 -> GELU -> mlp.3, whole or split over tp.
int mlp(GraphBuilder& g, const std::string& name, TensorGroup* tp) {
  if (!tp) {
    g.add(mlp_linear(name + ".0", kHidden, kMlp, TpSplit::Column));
    g.add(std::make_unique<GELU>(name + ".1"));
    return g.add(mlp_linear(name + ".3", kMlp, kHidden, TpSplit::Row));
  }
  g.add(std::make_unique<CopyToTensorGroup>(name + ".copy_to_tp", *tp));
  g.add(std::make_unique<ColumnParallelTokenLinear>(name + ".0", kHidden, kMlp, *tp, std::vector<int64_t>{},
                                                    mlp_weight_init(kHidden, kMlp), kMlpBiasInit));
  g.add(std::make_unique<GELU>(name + ".1"));
  g.add(std::make_unique<RowParallelTokenLinear>(name + ".3", kMlp, kHidden, *tp, std::vector<int64_t>{},
                                                 mlp_weight_init(kMlp, kHidden)));
  g.add(std::make_unique<ReduceFromTensorGroup>(name + ".reduce_from_tp", *tp));
  return g.add(std::make_unique<TokenBias>(name + ".3", kHidden, kMlpBiasInit, kMlp));
}

// EncoderBlock: x + self_attention(ln_1(x)), then that + mlp(ln_2(that)).
int encoder_block(GraphBuilder& g, const std::string& name, int x, TensorGroup* tp) {
  g.add(std::make_unique<LayerNorm>(name + ".ln_1", kHidden, kLayerNormEps), {x});
  const int a = attention(g, name + ".self_attention", tp);
  const int h = g.add(std::make_unique<Add>(name + ".add_1"), {a, x});
  g.add(std::make_unique<LayerNorm>(name + ".ln_2", kHidden, kLayerNormEps), {h});
  const int y = mlp(g, name + ".mlp", tp);
  return g.add(std::make_unique<Add>(name + ".add_2"), {y, h});
}

std::unique_ptr<Model> vit_with(TensorGroup* tp) {
  constexpr int grid = kImage / kPatch, tokens = grid * grid + 1;
  GraphBuilder g({1, kImage, kImage});
  // conv_proj and the tokens' reshape and permute as one layer; the replaced patch embedding keeps
  // nn.Conv2d's default init (weight and bias).
  g.add(std::make_unique<PatchEmbedding>("conv_proj", 1, kHidden, kPatch));
  g.add(std::make_unique<ClassToken>("class_token", kHidden));
  int x = g.add(std::make_unique<PositionEmbedding>("encoder.pos_embedding", tokens, kHidden));
  for (int l = 0; l < kLayers; ++l) x = encoder_block(g, "encoder.layers.encoder_layer_" + std::to_string(l), x, tp);
  g.add(std::make_unique<LayerNorm>("encoder.ln", kHidden, kLayerNormEps));
  g.add(std::make_unique<SelectToken>("class_token_out", 0));
  // torchvision zeroes the head (weight and bias).
  g.add(std::make_unique<Linear>("heads.head", kHidden, kClasses, Init::constant(0.0), Init::constant(0.0)));
  auto model = g.build();
  model->set_name("vit");
  return model;
}

}  // namespace

std::unique_ptr<Model> make_vit() { return vit_with(nullptr); }

std::unique_ptr<Model> make_vit_tp(TensorGroup& tp) {
  check_tensor_parallel("vit", tp.size());
  return vit_with(&tp);
}

}  // namespace ringtrain::nn
