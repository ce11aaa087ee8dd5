// `ringtrain export`: a checkpoint's model as an ONNX file (export/onnx_export.h; docs/EXPORT.md). The model
// comes from the checkpoint as `ringtrain eval` takes it (checkpoint_model.h). A build without ONNX and
// protobuf (RINGTRAIN_HAVE_ONNX unset) has the command and says so in one line.
#include <cstdio>
#include <map>
#include <string>

#include "ringtrain/cli/checkpoint_model.h"
#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/train/checkpoint.h"
#ifdef RINGTRAIN_HAVE_ONNX
#include "ringtrain/export/onnx_export.h"
#endif

namespace ringtrain::cli {

int export_command(int argc, char** argv, int first) {
  Options opt("ringtrain export --checkpoint PATH --onnx OUT.onnx [options]",
              "Writes a checkpoint's model as ONNX (opset 13, eval mode): input \"input\" float [batch, 1, 28, 28] "
              "holding pixel / 255, output \"logits\" [batch, 10].");
  opt.add("checkpoint", "", "safetensors checkpoint to export (required)");
  opt.add("onnx", "", "the ONNX file to write (required; written atomically)");
  opt.add("model", "auto", kCheckpointModelHelp);
  if (!opt.parse(argc, argv, first)) return 0;
  check(!opt.str("checkpoint").empty(), "export needs --checkpoint PATH");
  check(!opt.str("onnx").empty(), "export needs --onnx OUT.onnx");
#ifdef RINGTRAIN_HAVE_ONNX
  auto model = load_checkpoint_model(opt.str("checkpoint"), opt.str("model"));
  // The training run's own metadata (dataset, epochs, seed, ...) travels along; the format's and the
  // optimizer's do not describe the exported graph.
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : train::read_checkpoint_metadata(opt.str("checkpoint")))
    if (key != "format" && key != "format_version" && key.rfind(train::kOptimPrefix, 0) != 0) metadata[key] = value;
  const onnx_export::ExportSummary s = onnx_export::export_onnx(*model, opt.str("onnx"), metadata);
  std::printf("wrote %s (%s, opset %d, %zu nodes, %zu initializers, %zu bytes)\n", opt.str("onnx").c_str(),
              model->name().c_str(), onnx_export::kOpset, s.nodes, s.initializers, s.bytes);
  return 0;
#else
  throw Error("export: this ringtrain was built without ONNX support (install libonnx-dev and libprotobuf-dev, "
              "then rebuild)");
#endif
}

}  // namespace ringtrain::cli
