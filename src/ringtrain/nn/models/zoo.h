// The model zoo by name (`--model`): lenet5, resnet18, mobilenet_v2, vit. Each is torchvision 0.14's
// architecture with a 1-channel stem for 28x28 images, 10 classes, and the same state_dict names, shapes
// and initialisation, so checkpoints load into the PyTorch model with load_state_dict(strict=True)
// (scripts/zoo_torch.py holds the PyTorch definitions):
//   resnet18     torchvision.models.resnet18(num_classes=10), conv1 = Conv2d(1, 64, 7, 2, 3, bias=False)
//   mobilenet_v2 torchvision.models.mobilenet_v2(num_classes=10), features[0][0] = Conv2d(1, 32, 3, 2, 1, bias=False)
//   vit          VisionTransformer(image_size=28, patch_size=7, num_layers=6, num_heads=4, hidden_dim=128,
//                mlp_dim=512, num_classes=10), conv_proj = Conv2d(1, 128, 7, 7)
// The replaced stems are fresh nn.Conv2d modules in PyTorch, so they get nn.Conv2d's default
// initialisation (not the architecture's own init, which ran before the replacement); so do ours.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/nn/model.h"

namespace ringtrain::nn {

// The names --model accepts, in the order the help lists them.
const std::vector<std::string>& model_names();
// The model called name (Model::name() is set); throws Error naming the bad name and the choices.
std::unique_ptr<Model> make_model(const std::string& name);

std::unique_ptr<Model> make_resnet18();
std::unique_ptr<Model> make_mobilenet_v2();
std::unique_ptr<Model> make_vit();

// Tensor parallelism (--tp T, docs/DISTRIBUTED.md): lenet5 (fc1/fc2 split, make_lenet5_tp) and vit (each
// encoder block's attention split by heads and its MLP split, Megatron-LM; make_vit_tp). The same
// parameter names as the whole model; the views hold this rank's shards. tp must outlive the model.
class TensorGroup;
// Throws a one-line Error unless `name` can be split over tp ranks (tp > 1: a model above; vit: tp divides
// its 4 heads). Cheap: for refusing an option before any work.
void check_tensor_parallel(const std::string& name, int tp);
std::unique_ptr<Model> make_model_tp(const std::string& name, TensorGroup& tp);
std::unique_ptr<Model> make_vit_tp(TensorGroup& tp);
// vit's attention heads (torchvision's num_heads = 4).
constexpr int kVitHeads = 4;

}  // namespace ringtrain::nn
