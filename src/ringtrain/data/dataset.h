// Image-classification datasets stored as the four standard IDX files (MNIST layout):
//   train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte
// each raw or with ".gz" (the raw file wins if both exist). Images are uint8 N x R x C (R rows, C
// columns), labels uint8 N with values 0..9. Loading validates every file and the pair's agreement.
//
// Names: "digits" is the dataset `ringtrain data prepare` writes to data_root()/digits; "fashion" is
// Debian's dataset-fashion-mnist; anything else is a directory path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/data/byte_array.h"

namespace ringtrain::data {

constexpr int kNumClasses = 10;

struct Split {
  int64_t count = 0;  // N
  int rows = 0, cols = 0;
  ByteArray images;             // N * rows * cols, sample-major (memory-mapped for raw IDX files)
  std::vector<uint8_t> labels;  // N, each 0..9
  // The rows x cols pixels of sample i (0 <= i < count; not checked).
  const uint8_t* image(int64_t i) const { return images.data() + i * int64_t(rows) * cols; }
};

struct Dataset {
  std::string name, dir;  // name as asked for ("digits", "fashion" or a path); dir resolved
  Split train, test;
};

// Where prepared datasets live: $RINGTRAIN_DATA if set and non-empty, else "./data".
std::string data_root();

// The directory that holds a dataset: "digits" -> data_root()/digits, "fashion" -> kFashionDir,
// anything else is taken as a directory path as given.
std::string resolve_dataset_dir(const std::string& name);
inline constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

// The file of a split ("train" or "t10k") and kind ("images" or "labels") in dir: the raw name if it
// exists, else the ".gz" name if that exists, else "" (missing).
std::string find_idx_file(const std::string& dir, const std::string& split, const std::string& kind);

// Loads and validates one split ("train" or "t10k") from dir. Images of raw IDX files are memory-mapped,
// not read whole (gzip files are decompressed into memory); labels are read.
Split load_split(const std::string& dir, const std::string& split);

// Resolves name, checks that the four files are there (with a hint on how to get them for "digits"
// and "fashion"), loads both splits and checks that they have the same image size.
Dataset load_dataset(const std::string& name);

}  // namespace ringtrain::data
