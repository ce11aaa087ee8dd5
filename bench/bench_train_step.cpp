// One LeNet-5 training step (forward, softmax cross-entropy, backward, Adam) on synthetic MNIST-shaped
// data, timed: ringtrain's side of bench/compare_torch.sh, without data loading or the CLI.
//
//   bench_train_step [--batch 256] [--threads 1] [--isa avx512] [--precision fp32|bf16|fp16] [--steps 200]
//                    [--repeats 5] [--data DIR]
//   bench_train_step --layers [--model lenet5|resnet18|mobilenet_v2|vit] [--precisions fp32[,bf16]]
//                    [--batch 64] [--threads 1] [--steps N] [--isa L] [--data DIR]
//
// --data DIR: the first 8 batches of DIR/train-images-idx3-ubyte(.gz) and its labels (e.g. Debian's
// /usr/share/datasets/fashion-mnist), pixels scaled to [0,1] as the trainer does; else uniform noise.
//
// Prints samples/s as the median over `repeats` timed runs of `steps` steps each (after warm-up
// steps), and the whole-step GFLOP/s from the nominal 2.26 MFLOP per sample (bench_ops times each op).
//
// --layers: where a step's time goes, on one thread (or --threads T: the calling thread's wall clock), per node and pass of any zoo model (default lenet5, batch
// 64, fp32), with each pass's FLOPs from the layers' own counts, its GFLOP/s and % of this core's measured fp32
// peak, a summary over the blocks, and the whole step's % of peak (bench/train_step_profile.h). With several
// --precisions each has its own model (same initial weights), their steps alternate, and each pass's time is
// also given as the first precision's over the other's.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/data/idx.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"
#include "ringtrain/optim/optimizer.h"
#include "train_step_profile.h"

using namespace ringtrain;
using Clock = std::chrono::steady_clock;

namespace {

// Multiply-adds of one LeNet-5 training step per sample, x2 for FLOP (DESIGN.md / issue 3: 2.26 MFLOP).
double lenet_flop_per_sample() {
  const double conv1 = 6.0 * 28 * 28 * 25, conv2 = 16.0 * 10 * 10 * 150;
  const double fc = 400.0 * 120 + 120.0 * 84 + 84.0 * 10;
  // forward + backward-weight for conv1 (no input gradient), three passes for the rest.
  return 2.0 * (2 * conv1 + 3 * conv2 + 3 * fc);
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int arg_int(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return def;
}
const char* arg_str(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}
bool has_flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

}  // namespace

// Every argument is one of ours, each valued option with its value, and the --layers-only ones only with
// --layers (and the LeNet-5 timing's only without): a misspelt option (--batch-size) must not run the default.
void check_arguments(int argc, char** argv) {
  const std::vector<std::string> both = {"--batch", "--steps", "--isa", "--data", "--threads"};
  const std::vector<std::string> layers_only = {"--model", "--precisions"};
  const std::vector<std::string> lenet_only = {"--repeats", "--precision"};
  const bool layers = has_flag(argc, argv, "--layers");
  auto in = [](const std::vector<std::string>& names, const std::string& a) {
    return std::find(names.begin(), names.end(), a) != names.end();
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--layers") continue;
    check(in(both, a) || in(layers_only, a) || in(lenet_only, a),
          "unknown option '" + a + "' (see the comment at the top of bench/bench_train_step.cpp)");
    check(i + 1 < argc, a + " needs a value");
    check(layers || !in(layers_only, a), a + " needs --layers");
    check(!layers || !in(lenet_only, a), a + " is not an option of --layers");
    ++i;
  }
}

int run(int argc, char** argv) {
  check_arguments(argc, argv);
  const bool layers = has_flag(argc, argv, "--layers");
  const int batch = arg_int(argc, argv, "--batch", layers ? 64 : 256);
  const int threads = arg_int(argc, argv, "--threads", 1);
  const int steps = arg_int(argc, argv, "--steps", std::max(20, 50000 / batch));
  const int repeats = arg_int(argc, argv, "--repeats", 5);
  const ops::IsaLevel level = ops::parse_isa(arg_str(argc, argv, "--isa", ops::isa_name(ops::default_isa())));
  const ops::Precision precision = ops::parse_precision(arg_str(argc, argv, "--precision", "fp32"));
  const ops::KernelTable& k = ops::kernels_for(level, precision);  // fp32: kernels_for(level)

  // 8 batches, cycled: real images with --data, else noise in [0, 1) with random labels.
  const int nbatches = 8;
  std::vector<float> x(std::size_t(nbatches) * batch * 784);
  std::vector<uint8_t> y(std::size_t(nbatches) * batch);
  const char* dir = arg_str(argc, argv, "--data", nullptr);
  if (dir) {
    auto open = [&](const char* name) {
      const std::string base = std::string(dir) + "/" + name;
      try {
        return data::read_idx(base + ".gz");
      } catch (const Error&) {
        return data::read_idx(base);
      }
    };
    const data::IdxArray images = open("train-images-idx3-ubyte"), labels = open("train-labels-idx1-ubyte");
    if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28 || images.dims[0] < int64_t(y.size()) ||
        labels.dims[0] < int64_t(y.size())) {
      std::fprintf(stderr, "bench_train_step: %s: need at least %zu 28x28 images and labels\n", dir, y.size());
      return 1;
    }
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(images.data[i]) / 255.0f;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = labels.data[i];
  } else {
    Rng rng(1);
    for (auto& v : x) v = rng.uniform();
    for (auto& l : y) l = uint8_t(rng.below(10));
  }

  if (layers) {
    bench::ProfileOptions o;
    o.model = arg_str(argc, argv, "--model", "lenet5");
    const std::string list = arg_str(argc, argv, "--precisions", "fp32");
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      o.precisions.push_back(ops::parse_precision(list.substr(at, comma - at)));
      at = comma + 1;
    }
    o.level = level;
    o.batch = batch;
    o.threads = threads;
    o.steps = arg_int(argc, argv, "--steps", 0);
    return bench::profile_train_step(o, x, y, nbatches);
  }

  auto model = nn::make_lenet5();
  model->init_parameters(0);
  model->set_threads(threads);
  model->reserve(batch);
  optim::Adam adam(model->params().size(), {});
  adam.use_kernels(k);  // as the trainer does: the table's vectorised adam_step (same bits as the scalar loop)
  std::vector<float> probs(std::size_t(batch) * 10), dlogits(probs.size());
  int cursor = 0;
  float last_loss = 0.0f;
  auto step = [&] {
    const float* xb = x.data() + std::size_t(cursor) * batch * 784;
    const uint8_t* yb = y.data() + std::size_t(cursor) * batch;
    cursor = (cursor + 1) % nbatches;
    const float* logits = model->forward(k, xb, batch);
    last_loss = k.softmax_xent_forward(probs.data(), logits, yb, batch, 10);
    k.softmax_xent_backward(dlogits.data(), probs.data(), yb, batch, 10, 1.0f / float(batch));
    model->backward(k, xb, dlogits.data(), batch);
    adam.step(model->params().params(), model->params().grads());
  };

  for (int i = 0; i < std::max(3, steps / 10); ++i) step();  // warm-up: scratch sized, caches and pool warm
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    const double c0 = process_cpu_seconds();
    for (int i = 0; i < steps; ++i) step();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(double(steps) * batch / s);
    cpu_rates.push_back(double(steps) * batch / (process_cpu_seconds() - c0));
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  const double median = rates[rates.size() / 2];
  std::printf("ringtrain lenet5 isa=%s precision=%s threads=%d batch=%d steps=%d repeats=%d data=%s: %.0f samples/s (median; min %.0f, max %.0f), "
              "%.1f GFLOP/s, loss %.4f\n",
              ops::isa_name(level), ops::precision_name(precision), threads, batch, steps, repeats, dir ? dir : "noise", median, rates.front(), rates.back(),
              median * lenet_flop_per_sample() * 1e-9, last_loss);
  // Per second of CPU time used by the process (all its threads): on a shared machine, what the step
  // costs when it does get a core. Equals the figure above on a quiet machine with --threads 1.
  const double cpu_gflops = cpu_rates[cpu_rates.size() / 2] * lenet_flop_per_sample() * 1e-9;
  std::printf("  per CPU-second: %.0f samples/s (median), %.1f GFLOP/s per core busy\n", cpu_rates[cpu_rates.size() / 2],
              cpu_gflops);
  // Against the peak of the vectors this level's kernels use (issue 14 acceptance 4 holds the AVX2 path to the ymm
  // FMA rate), measured now, after the runs: one thread's share of one core.
  if (threads == 1 && (level == ops::IsaLevel::Avx2 || level == ops::IsaLevel::Avx512)) {
    const bool zmm = level == ops::IsaLevel::Avx512;
    const double peak = bench::fp32_peak_gflops_of(zmm);
    std::printf("  = %.1f%% of this core's %s fp32 peak (%.1f GFLOP/s, %s FMA, measured after the runs)\n",
                100.0 * cpu_gflops / peak, ops::isa_name(level), peak, zmm ? "zmm" : "ymm");
  }

  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.what());
    return 1;
  }
}
