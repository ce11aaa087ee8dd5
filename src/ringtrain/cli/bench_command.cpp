// `ringtrain bench`: the speed-up table. Runs `ringtrain train` for a fixed number of steps on the
// million-sample set in each configuration (reference kernels on 1 rank, fast kernels on 1 and 2 ranks,
// then bf16, then bf16 + tensor parallelism), plus PyTorch on the same model when Debian's python3-torch
// is installed, and prints (and writes as markdown) per-step time, samples/s, projected time for a
// 1M-sample epoch, speed-up over the first row and % of the machine's measured fp32 peak.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/peak.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/nn/models/zoo.h"

namespace ringtrain::cli {

namespace {


struct Row {
  Row(std::string n, std::string c, int global) : name(std::move(n)), command(std::move(c)), global_batch(global) {}
  std::string name, command;
  int global_batch = 1;  // samples a step over all ranks (tensor-parallel ranks share theirs)
  bool ok = false;
  std::string error;
  int64_t steps = 0;
  double seconds = 0, samples_per_s = 0;
};

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  check(n > 0, "bench: cannot find the ringtrain executable (/proc/self/exe)");
  buf[n] = '\0';
  return buf;
}

// Runs a shell command, returns its combined output and exit status.
std::string run_captured(const std::string& command, int* status) {
  std::string out;
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  check(p != nullptr, "bench: cannot run: " + command);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
  return out;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  auto at = t.rfind('\n');
  return at == std::string::npos ? t : t.substr(at + 1);
}

void run_train_row(Row& row) {
  int status = 0;
  std::string out = run_captured(row.command, &status);
  std::smatch m;
  static const std::regex trained(R"(trained (\d+) steps in ([0-9.]+)s \(([0-9.]+) samples/s)");
  if (status == 0 && std::regex_search(out, m, trained)) {
    row.ok = true;
    row.steps = std::stoll(m[1]);
    row.seconds = std::stod(m[2]);
    row.samples_per_s = std::stod(m[3]);
  } else {
    row.error = "exit " + std::to_string(status) + ": " + last_line(out);
  }
}

void run_torch_row(Row& row) {
  int status = 0;
  std::string out = run_captured(row.command, &status);
  std::smatch m;
  static const std::regex rate(R"(: ([0-9.]+) samples/s \(median)");
  if (status == 0 && std::regex_search(out, m, rate)) {
    row.ok = true;
    row.samples_per_s = std::stod(m[1]);
  } else {
    row.error = "exit " + std::to_string(status) + ": " + last_line(out);
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int bench_command(int argc, char** argv, int first) {
  Options opt("ringtrain bench [options]",
              "Trains a fixed number of steps in each configuration on the million-sample set and prints the\n"
              "speed-up table (also written as markdown). Make the set first with `ringtrain data expand`.");
  opt.add("model", "lenet5", "lenet5 | resnet18 | mobilenet_v2 | vit");
  opt.add("data", data::data_root() + "/digits-expanded", "dataset to train on (the million-sample expansion)");
  opt.add("steps", "300", "training steps of each fast configuration");
  opt.add("ref-steps", "auto", "training steps of the reference-kernel configuration (it is slow; auto: 20 for "
                               "lenet5, 2 for the larger models; 0: skip it)");
  opt.add("batch-size", "256", "per-rank batch");
  opt.add("out", "bench.md", "markdown file for the table");
  opt.add("python", "/usr/bin/python3", "Python with torch for the PyTorch row ('' to skip it)");
  opt.add("torch-script", std::string(RINGTRAIN_SOURCE_DIR) + "/bench/torch_lenet.py", "the PyTorch side");
  if (!opt.parse(argc, argv, first)) return 0;
  const std::string model_name = opt.str("model");
  // FLOPs of one training sample from the layers' own counts (forward, backward-data but for the first
  // layer's, backward-weight); the bad name is refused here too.
  const double flop_per_sample = nn::make_model(model_name)->train_flops_per_sample();
  const bool lenet = model_name == "lenet5";
  const int64_t steps = opt.integer("steps", 10, 100000);
  const int64_t ref_steps = opt.str("ref-steps") == "auto" ? (lenet ? 20 : 2) : opt.integer("ref-steps", 0, 100000);
  const int batch = int(opt.integer("batch-size", 1, 65536));
  const std::string dir = opt.str("data");
  data::load_split(dir, "t10k");  // fails early, naming what is missing
  check(!data::find_idx_file(dir, "train", "images").empty(),
        dir + ": no training images; make the million-sample set with `ringtrain data expand`");

  const std::string exe = self_path();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  // Plain training (no recipe), so the rows measure the step alone.
  const std::string common = " train --model " + model_name + " --data '" + dir + "' --epochs 1 --batch-size " +
                             std::to_string(batch) +
                             " --log-every 0 --quiet --timeout 600 --ema 0 --label-smoothing 0 --augment-shift 0";
  const std::string mpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --bind-to core ";
  std::vector<Row> rows;
  if (ref_steps > 0)
    rows.push_back({"1 rank, reference kernels", "'" + exe + "'" + common + " --isa ref --max-steps " + std::to_string(ref_steps), batch});
  rows.push_back({"1 rank, fast kernels", "'" + exe + "'" + common + " --max-steps " + std::to_string(steps), batch});
  rows.push_back({"2 ranks, fast", mpirun + "'" + exe + "'" + common + " --max-steps " + std::to_string(steps), 2 * batch});
  rows.push_back({"2 ranks, fast + bf16",
                  mpirun + "'" + exe + "'" + common + " --precision bf16 --max-steps " + std::to_string(steps), 2 * batch});
  if (lenet)  // tensor parallelism splits only LeNet-5's fully connected layers
    rows.push_back({"2 ranks, fast + bf16 + tp=2 (1 data-parallel rank)",
                    mpirun + "'" + exe + "'" + common + " --precision bf16 --tp 2 --max-steps " + std::to_string(steps), batch});
  // The PyTorch row: bench/torch_lenet.py for LeNet-5 (its own model), bench/torch_zoo.py (torchvision's) else.
  const std::string torch_script = opt.given("torch-script") || lenet ? opt.str("torch-script")
                                                                      : std::string(RINGTRAIN_SOURCE_DIR) + "/bench/torch_zoo.py";
  const bool torch = !opt.str("python").empty() && std::filesystem::exists(opt.str("python")) &&
                     std::filesystem::exists(torch_script);

  const double peak_core = bench::fp32_peak_gflops();
  const double peak_machine = peak_core * cores;
  std::printf("measured fp32 peak: %.1f GFLOP/s per core x %d cores = %.1f GFLOP/s\n", peak_core, cores, peak_machine);
  for (Row& r : rows) {
    std::printf("running: %s ...\n", r.name.c_str());
    std::fflush(stdout);
    run_train_row(r);
  }
  Row torch_row{"PyTorch " + std::string("(python3-torch, 2 threads, batch ") + std::to_string(2 * batch) + ")",
                lenet ? "OMP_NUM_THREADS=2 '" + opt.str("python") + "' '" + torch_script + "' --threads 2 --batch " +
                            std::to_string(2 * batch) + " --repeats 3 --data '" + dir + "'"
                      : "OMP_NUM_THREADS=2 '" + opt.str("python") + "' '" + torch_script + "' --model " + model_name +
                            " --threads 2 --batch-size " + std::to_string(2 * batch) + " --speed-steps 20 --data '" + dir + "'",
                2 * batch};
  if (torch) {
    std::printf("running: %s ...\n", torch_row.name.c_str());
    std::fflush(stdout);
    run_torch_row(torch_row);
    rows.push_back(torch_row);
  }

  const double base = rows[0].ok ? rows[0].samples_per_s : 0.0;  // speed-ups against the first row
  std::string md = "| configuration | step time (ms) | samples/s | 1M-sample epoch | speed-up | % of machine fp32 peak |\n"
                   "|---|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    if (!r.ok) {
      md += "| " + r.name + " | failed: " + r.error + " | | | | |\n";
      continue;
    }
    const double step_ms = 1000.0 * r.global_batch / r.samples_per_s;
    const double epoch_s = 1e6 / r.samples_per_s;
    md += "| " + r.name + " | " + fmt("%.2f", step_ms) + " | " + fmt("%.0f", r.samples_per_s) + " | " +
          (epoch_s >= 120 ? fmt("%.1f min", epoch_s / 60) : fmt("%.1f s", epoch_s)) + " | " +
          (base > 0 ? fmt("%.1fx", r.samples_per_s / base) : std::string("-")) + " | " +
          fmt("%.1f%%", 100.0 * r.samples_per_s * flop_per_sample / (peak_machine * 1e9)) + " |\n";
  }
  md += "\n" + model_name + ", per-rank batch " + std::to_string(batch) + " (tensor-parallel ranks share one); " +
        std::to_string(steps) + " steps a fast configuration, " + std::to_string(ref_steps) + " with reference kernels; " +
        fmt("%.1f", peak_core) + " GFLOP/s fp32 peak per core x " + std::to_string(cores) + " cores, measured; " +
        fmt("%.2f", flop_per_sample / 1e6) + " MFLOP a training sample from the layers' counts (bf16 rows against the "
        "fp32 peak too: vdpbf16ps does twice the work of an fp32 FMA).\n";
  std::printf("\n%s", md.c_str());
  std::ofstream out(opt.str("out"));
  check(bool(out), opt.str("out") + ": cannot open for writing");
  out << md;
  check(bool(out), opt.str("out") + ": write failed");
  std::printf("wrote %s\n", opt.str("out").c_str());
  return 0;
}

}  // namespace ringtrain::cli
