#include "ringtrain/nn/models/zoo.h"

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/nn/parallel_linear.h"

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

void check_tensor_parallel(const std::string& name, int tp) {
  check(tp >= 1, "--tp must be at least 1, got " + std::to_string(tp));
  if (tp == 1) return;
  check(name == "lenet5" || name == "vit",
        "--tp: tensor parallelism splits lenet5's fully connected layers and vit's encoder, not --model " + name);
  check(name != "vit" || kVitHeads % tp == 0,
        "--tp " + std::to_string(tp) + ": vit's " + std::to_string(kVitHeads) +
            " attention heads cannot be split evenly over " + std::to_string(tp) +
            " tensor-parallel ranks; use --tp 1, 2 or 4");
}

std::unique_ptr<Model> make_model_tp(const std::string& name, TensorGroup& tp) {
  check_tensor_parallel(name, tp.size());
  if (name == "vit") return make_vit_tp(tp);
  if (name == "lenet5") return make_lenet5_tp(tp);
  return make_model(name);  // tp == 1: nothing to split
}

}  // namespace ringtrain::nn
