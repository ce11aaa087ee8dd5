// `ringtrain eval`: loss, accuracy, per-class accuracy and the confusion matrix of a checkpoint on a
// dataset's test split; optionally writes every prediction (one label a line) for comparison with
// PyTorch (scripts/torch_check.py). With --tp T under `mpirun -np T` the model runs tensor-parallel, each
// rank holding its shard of the split layers (cut from the checkpoint's whole tensors) and evaluating the
// whole split (the tensor group's ranks see the same samples); world rank 0 prints and writes.
#include <algorithm>
#include <cstdio>
#include <vector>
#include <fstream>
#include <iostream>
#include <memory>

#include "ringtrain/cli/checkpoint_model.h"
#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/show.h"
#include "ringtrain/dist/communicator.h"
#include "ringtrain/dist/launcher.h"
#include "ringtrain/dist/mpi_communicator.h"
#include "ringtrain/dist/process_grid.h"
#include "ringtrain/nn/models/zoo.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/train/evaluate.h"
#include "ringtrain/train/tp_checkpoint.h"

namespace ringtrain::cli {

int eval_command(int argc, char** argv, int first) {
  Options opt("ringtrain eval --checkpoint PATH [options]",
              "Evaluates a checkpoint on the test split of a dataset.");
  opt.add("checkpoint", "", "safetensors checkpoint to evaluate (required)");
  opt.add("data", "digits", "dataset: digits | fashion | DIR");
  opt.add("model", "auto", kCheckpointModelHelp);
  opt.add("batch-size", "auto", "samples per forward pass (auto: 500, fewer for models with large activations)");
  opt.add("predictions", "", "write the predicted label of every test sample, one a line, to this file");
  opt.add("isa", "auto", "kernels: auto | ref | scalar | avx2 | avx512");
  opt.add("misclassified", "", "draw the worst mistakes (highest loss) as a PNG grid with true and predicted labels");
  opt.add("count", "32", "how many mistakes --misclassified draws");
  opt.add("tp", "1", "tensor-parallel ranks (lenet5, vit): run as mpirun -np T ringtrain eval --tp T ...");
  if (!opt.parse(argc, argv, first)) return 0;
  check(!opt.str("checkpoint").empty(), "eval needs --checkpoint PATH");
  const int64_t tp = opt.integer("tp", 1, 4096);
  const int batch = opt.str("batch-size") == "auto" ? 0 : int(opt.integer("batch-size", 1, 65536));
  const ops::IsaLevel isa = opt.str("isa") == "auto" ? ops::default_isa() : ops::parse_isa(opt.str("isa"));
  const ops::KernelTable& kernels = ops::kernels_for(isa);

  auto model = load_checkpoint_model(opt.str("checkpoint"), opt.str("model"));
  std::unique_ptr<dist::MpiSession> session;
  std::unique_ptr<dist::Communicator> world;
  std::unique_ptr<dist::ProcessGrid> grid;
  if (tp > 1) {  // this rank's shard of the model, cut from the checkpoint's whole tensors
    nn::check_tensor_parallel(model->name(), int(tp));
    check(dist::launched_by_mpi(), "--tp " + opt.str("tp") + " runs under mpirun: mpirun -np " + opt.str("tp") +
                                       " ringtrain eval --tp " + opt.str("tp") + " ...");
    session = std::make_unique<dist::MpiSession>(&argc, &argv);
    world = std::make_unique<dist::MpiCommunicator>(MPI_COMM_WORLD);
    check(world->size() == tp, "eval --tp " + opt.str("tp") + " runs one tensor group: mpirun -np " + opt.str("tp") +
                                   ", not " + std::to_string(world->size()) + " ranks");
    grid = std::make_unique<dist::ProcessGrid>(*world, int(tp));
    auto shard = nn::make_model_tp(model->name(), grid->tensor_group());
    train::load_sharded_weights(opt.str("checkpoint"), *shard);
    model = std::move(shard);
  }
  const bool writer = !world || world->rank() == 0;
  data::Split test = data::load_split(data::resolve_dataset_dir(opt.str("data")), "t10k");
  dist::LocalCommunicator comm;  // every rank evaluates the whole split
  const int64_t count = opt.integer("count", 1, 10000);
  const bool keep = !opt.str("predictions").empty() || !opt.str("misclassified").empty();
  train::EvalResult r = train::evaluate(*model, kernels, test, comm, batch, keep);
  if (!writer) return 0;

  std::printf("test samples: %lld\n", (long long)r.samples);
  std::printf("test loss: %.9g\n", r.mean_loss());
  std::printf("model: %s\n", model->name().c_str());
  std::printf("per-class accuracy:");
  for (int t = 0; t < r.classes; ++t) {
    int64_t total = 0;
    for (int p = 0; p < r.classes; ++p) total += r.confusion_at(t, p);
    std::printf(" %d:%.2f%%", t, total ? 100.0 * double(r.confusion_at(t, t)) / double(total) : 0.0);
  }
  std::printf("\nconfusion matrix (rows: true label, columns: predicted):\n      ");
  for (int p = 0; p < r.classes; ++p) std::printf("%6d", p);
  std::printf("\n");
  for (int t = 0; t < r.classes; ++t) {
    std::printf("%6d", t);
    for (int p = 0; p < r.classes; ++p) std::printf("%6lld", (long long)r.confusion_at(t, p));
    std::printf("\n");
  }
  std::printf("test accuracy: %.2f%%\n", 100.0 * r.accuracy());
  if (!opt.str("misclassified").empty()) {
    // The mistakes the model was most sure about come first (highest loss on the true label).
    std::vector<int64_t> wrong;
    for (int64_t i = 0; i < int64_t(r.predictions.size()); ++i)
      if (r.predictions[i] != test.labels[i]) wrong.push_back(i);
    std::sort(wrong.begin(), wrong.end(), [&](int64_t a, int64_t b) { return r.losses[a] > r.losses[b]; });
    if (int64_t(wrong.size()) > count) wrong.resize(std::size_t(count));
    if (wrong.empty()) {
      std::printf("no misclassified samples: nothing to draw\n");
    } else {
      std::vector<data::GridCell> cells;
      for (int64_t i : wrong)
        cells.push_back({i, "#" + std::to_string(i) + " true " + std::to_string(test.labels[i]) + " pred " +
                                std::to_string(r.predictions[i]), true});
      data::render_grid(test, cells, 8, 3).write_png(opt.str("misclassified"));
      std::printf("wrote %s (%zu worst of %zu mistakes)\n", opt.str("misclassified").c_str(), cells.size(),
                  std::size_t(r.samples - r.correct));
    }
  }
  if (!opt.str("predictions").empty()) {
    std::ofstream out(opt.str("predictions"));
    check(bool(out), opt.str("predictions") + ": cannot open for writing");
    for (uint8_t p : r.predictions) out << int(p) << "\n";
    check(bool(out), opt.str("predictions") + ": write failed");
  }
  return 0;
}

}  // namespace ringtrain::cli
