// `ringtrain`: the command-line entry point. Dispatches to a subcommand; any ringtrain::Error becomes
// one line on stderr ("ringtrain: <what is wrong>") and exit code 1.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/version.h"
#include "ringtrain/core/error.h"

namespace {

const char* kUsage =
    "usage: ringtrain <command> [options]  |  ringtrain --version (the build, this CPU's kernels, MPI)\n\n"
    "commands:\n"
    "  train     train a model of the zoo: lenet5, resnet18, mobilenet_v2, vit (one process, or many under mpirun / --nproc)\n"
    "  eval      loss, accuracy and confusion matrix of a checkpoint on a dataset's test split\n"
    "  export    write a checkpoint's model as an ONNX file (opset 13, eval mode)\n"
    "  data      prepare, expand and show datasets (ringtrain data --help)\n"
    "  plot      draw the loss, accuracy and throughput curves of a metrics file as a PNG\n"
    "  bench     the speed-up table: every configuration on the million-sample set, and PyTorch\n\n"
    "`ringtrain <command> --help` lists a command's options with their defaults.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  try {
    if (command == "--version") return std::fputs(ringtrain::cli::version_report().c_str(), stdout) < 0;
    if (command == "train") return ringtrain::cli::train_command(argc, argv, 2);
    if (command == "eval") return ringtrain::cli::eval_command(argc, argv, 2);
    if (command == "export") return ringtrain::cli::export_command(argc, argv, 2);
    if (command == "data") return ringtrain::cli::data_command(argc, argv, 2);
    if (command == "plot") return ringtrain::cli::plot_command(argc, argv, 2);
    if (command == "bench") return ringtrain::cli::bench_command(argc, argv, 2);
    std::fprintf(stderr, "ringtrain: unknown command '%s' (commands: train, eval, export, data, plot, bench; see --help)\n",
                 command.c_str());
    return 2;
  } catch (const ringtrain::Error& e) {
    std::fprintf(stderr, "ringtrain: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ringtrain: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain: internal error: %s\n", e.what());
    return 1;
  }
}
