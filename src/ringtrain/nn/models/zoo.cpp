#include "ringtrain/nn/models/zoo.h"

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/lenet5.h"

namespace ringtrain::nn {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"lenet5", "resnet18", "mobilenet_v2", "vit"};
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name) {
  if (name == "lenet5") return make_lenet5();
  if (name == "resnet18") return make_resnet18();
  if (name == "mobilenet_v2") return make_mobilenet_v2();
  if (name == "vit") return make_vit();
  std::string choices;
  for (const std::string& n : model_names()) choices += (choices.empty() ? "" : ", ") + n;
  throw Error("--model '" + name + "' is not one of " + choices);
}

}  // namespace ringtrain::nn
