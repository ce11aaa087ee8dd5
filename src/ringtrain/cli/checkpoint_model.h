// The model a command reads from a checkpoint (eval, export): `--model auto` takes the zoo model the
// checkpoint's metadata names (lenet5 when it names none, as for a plain PyTorch file); another --model value
// must match the metadata. The weights and buffers are loaded strictly (train/checkpoint.h).
#pragma once
#include <memory>
#include <string>

#include "ringtrain/nn/model.h"

namespace ringtrain::cli {

// The help text of the --model option of such commands.
extern const char* const kCheckpointModelHelp;

// The model model_option names ("auto": the checkpoint's), built and loaded from checkpoint. Throws Error
// ("<path>: ...") for a missing or corrupt file, another model's checkpoint or a bad tensor.
std::unique_ptr<nn::Model> load_checkpoint_model(const std::string& checkpoint, const std::string& model_option);

}  // namespace ringtrain::cli
