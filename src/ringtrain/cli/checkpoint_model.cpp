#include "ringtrain/cli/checkpoint_model.h"

#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain::cli {

const char* const kCheckpointModelHelp =
    "auto (the model the checkpoint's metadata names; lenet5 if none) | lenet5 | resnet18 | mobilenet_v2 | vit";

std::unique_ptr<nn::Model> load_checkpoint_model(const std::string& checkpoint, const std::string& model_option) {
  std::string name = model_option;
  if (name == "auto") {
    const auto metadata = train::read_checkpoint_metadata(checkpoint);
    name = metadata.count("model") ? metadata.at("model") : "lenet5";
  }
  auto model = nn::make_model(name);
  train::load_weights(checkpoint, *model);  // refuses another model's checkpoint by name
  return model;
}

}  // namespace ringtrain::cli
