// Dataset loading: the four IDX files of a directory, validated together (counts, label range, ranks,
// image sizes), name resolution, and the real Fashion-MNIST from Debian when it is installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/idx.h"

namespace fs = std::filesystem;
using ringtrain::Error;
using namespace ringtrain::data;

namespace {

// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class DatasetLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(RINGTRAIN_BINARY_DIR) / "test_tmp" /
            ("dataset_" + std::string(info->name()) + "_" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A synthetic dataset: n_train / n_test images of rows x cols, pixel (i, p) = (7i + p) mod 256,
  // label i mod 10. Train files raw, test files gzip (both forms are read).
  void write_dataset(int64_t n_train, int64_t n_test, int rows = 4, int cols = 3) {
    write_split("train", n_train, rows, cols, "");
    write_split("t10k", n_test, rows, cols, ".gz");
  }
  void write_split(const std::string& split, int64_t n, int rows, int cols, const std::string& suffix) {
    std::vector<uint8_t> images(std::size_t(n * rows * cols));
    std::vector<uint8_t> labels(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      for (int p = 0; p < rows * cols; ++p) images[std::size_t(i * rows * cols + p)] = uint8_t((7 * i + p) % 256);
      labels[std::size_t(i)] = uint8_t(i % 10);
    }
    write_idx(dir_ + "/" + split + "-images-idx3-ubyte" + suffix, {n, rows, cols}, images.data());
    write_idx(dir_ + "/" + split + "-labels-idx1-ubyte" + suffix, {n}, labels.data());
  }

  std::string error_of(const std::string& name) {
    try {
      load_dataset(name);
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      return msg;
    }
    ADD_FAILURE() << "load_dataset(" << name << ") succeeded";
    return "";
  }

  std::string dir_;
};

}  // namespace

TEST_F(DatasetLoad, LoadsSyntheticRawAndGzipFiles) {
  write_dataset(25, 12, 4, 3);
  ringtrain::data::Dataset ds = load_dataset(dir_);
  EXPECT_EQ(ds.name, dir_);
  EXPECT_EQ(ds.dir, dir_);
  EXPECT_EQ(ds.train.count, 25);
  EXPECT_EQ(ds.test.count, 12);
  EXPECT_EQ(ds.train.rows, 4);
  EXPECT_EQ(ds.train.cols, 3);
  ASSERT_EQ(ds.train.images.size(), 25u * 12u);
  ASSERT_EQ(ds.test.labels.size(), 12u);
  for (int64_t i = 0; i < ds.test.count; ++i) {
    EXPECT_EQ(ds.test.labels[std::size_t(i)], i % 10);
    const uint8_t* img = ds.test.image(i);
    for (int p = 0; p < 12; ++p) EXPECT_EQ(img[p], (7 * i + p) % 256) << "sample " << i << " pixel " << p;
  }
  EXPECT_EQ(ds.train.image(24)[11], (7 * 24 + 11) % 256);
}

TEST_F(DatasetLoad, RawFileIsPreferredOverGzip) {
  write_dataset(5, 5);
  std::vector<uint8_t> other(5, 3);
  write_idx(dir_ + "/train-labels-idx1-ubyte.gz", {5}, other.data());
  EXPECT_EQ(find_idx_file(dir_, "train", "labels"), dir_ + "/train-labels-idx1-ubyte");
  EXPECT_EQ(find_idx_file(dir_, "t10k", "images"), dir_ + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(find_idx_file(dir_, "t10k", "nothing"), "");
  EXPECT_EQ(load_split(dir_, "train").labels[3], 3);  // i mod 10, not the .gz file's 3s at every index
  EXPECT_EQ(load_split(dir_, "train").labels[4], 4);
}

TEST_F(DatasetLoad, CountMismatchNamesBothFilesAndCounts) {
  write_dataset(20, 10);
  std::vector<uint8_t> labels(19, 1);
  write_idx(dir_ + "/train-labels-idx1-ubyte", {19}, labels.data());
  std::string msg = error_of(dir_);
  EXPECT_NE(msg.find(dir_ + "/train-images-idx3-ubyte has 20 images"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir_ + "/train-labels-idx1-ubyte has 19 labels"), std::string::npos) << msg;
}

TEST_F(DatasetLoad, LabelOutOfRangeNamesFileIndexAndValue) {
  write_dataset(20, 10);
  std::vector<uint8_t> labels(10, 2);
  labels[7] = 10;
  write_idx(dir_ + "/t10k-labels-idx1-ubyte.gz", {10}, labels.data());
  std::string msg = error_of(dir_);
  EXPECT_NE(msg.find(dir_ + "/t10k-labels-idx1-ubyte.gz: label 7 is 10, outside 0..9"), std::string::npos) << msg;
}

TEST_F(DatasetLoad, WrongRanksAreNamed) {
  write_dataset(6, 6);
  std::vector<uint8_t> bytes(6 * 12, 1);
  write_idx(dir_ + "/train-images-idx3-ubyte", {6, 12}, bytes.data());
  std::string msg = error_of(dir_);
  EXPECT_NE(msg.find(dir_ + "/train-images-idx3-ubyte: images must have 3 dimensions"), std::string::npos) << msg;

  write_dataset(6, 6);
  write_idx(dir_ + "/train-labels-idx1-ubyte", {6, 1}, bytes.data());
  msg = error_of(dir_);
  EXPECT_NE(msg.find(dir_ + "/train-labels-idx1-ubyte: labels must have 1 dimension"), std::string::npos) << msg;
}

TEST_F(DatasetLoad, TrainAndTestImageSizesMustAgree) {
  write_split("train", 5, 4, 3, "");
  write_split("t10k", 5, 3, 4, "");
  std::string msg = error_of(dir_);
  EXPECT_NE(msg.find("train images are 4 x 3 but test images are 3 x 4"), std::string::npos) << msg;
}

TEST_F(DatasetLoad, MissingFileIsNamed) {
  write_dataset(5, 5);
  fs::remove(dir_ + "/t10k-labels-idx1-ubyte.gz");
  std::string msg = error_of(dir_);
  EXPECT_NE(msg.find(dir_ + "/t10k-labels-idx1-ubyte: missing"), std::string::npos) << msg;
  EXPECT_THROW(load_split(dir_, "t10k"), Error);
  EXPECT_THROW(load_split(dir_, "validation"), Error);
  msg = error_of(dir_ + "/no-such-subdir");
  EXPECT_NE(msg.find("no such dataset directory"), std::string::npos) << msg;
}

TEST_F(DatasetLoad, CorruptFileGivesTheIdxError) {
  write_dataset(5, 5);
  fs::resize_file(dir_ + "/train-images-idx3-ubyte", 30);
  std::string msg = error_of(dir_);
  EXPECT_EQ(msg.rfind(dir_ + "/train-images-idx3-ubyte: truncated data", 0), 0u) << msg;
}

TEST_F(DatasetLoad, MissingDigitsSaysToRunPrepare) {
  ScopedEnv env("RINGTRAIN_DATA", dir_.c_str());
  std::string msg = error_of("digits");
  EXPECT_NE(msg.find(dir_ + "/digits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ringtrain data prepare"), std::string::npos) << msg;
  fs::create_directories(dir_ + "/digits");
  msg = error_of("digits");
  EXPECT_NE(msg.find(dir_ + "/digits/train-images-idx3-ubyte: missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ringtrain data prepare"), std::string::npos) << msg;
  // Also when the resolved folder is loaded split by split (as `ringtrain eval` does).
  try {
    load_split(resolve_dataset_dir("digits"), "t10k");
    ADD_FAILURE() << "loaded a missing split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ringtrain data prepare"), std::string::npos) << e.what();
  }
}

TEST_F(DatasetLoad, DigitsAreLoadedFromTheDataRoot) {
  ScopedEnv env("RINGTRAIN_DATA", dir_.c_str());
  std::string root = dir_;
  dir_ = root + "/digits";  // write_dataset writes into dir_
  fs::create_directories(dir_);
  write_dataset(8, 3);
  dir_ = root;
  ringtrain::data::Dataset ds = load_dataset("digits");
  EXPECT_EQ(ds.name, "digits");
  EXPECT_EQ(ds.dir, root + "/digits");
  EXPECT_EQ(ds.train.count, 8);
  EXPECT_EQ(ds.test.count, 3);
}

TEST_F(DatasetLoad, ResolveRules) {
  {
    ScopedEnv env("RINGTRAIN_DATA", nullptr);
    EXPECT_EQ(data_root(), "./data");
    EXPECT_EQ(resolve_dataset_dir("digits"), "./data/digits");
  }
  {
    ScopedEnv env("RINGTRAIN_DATA", "");
    EXPECT_EQ(data_root(), "./data");
  }
  {
    ScopedEnv env("RINGTRAIN_DATA", "/srv/rt");
    EXPECT_EQ(data_root(), "/srv/rt");
    EXPECT_EQ(resolve_dataset_dir("digits"), "/srv/rt/digits");
    EXPECT_EQ(resolve_dataset_dir("fashion"), "/usr/share/datasets/fashion-mnist");
    EXPECT_EQ(resolve_dataset_dir("/data/mnist"), "/data/mnist");
    EXPECT_EQ(resolve_dataset_dir("rel/kmnist"), "rel/kmnist");
    EXPECT_EQ(resolve_dataset_dir("./digits"), "./digits");  // a path, not the name
  }
  EXPECT_THROW(resolve_dataset_dir(""), Error);
}

TEST_F(DatasetLoad, FashionMnistFromDebian) {
  if (!fs::is_directory(kFashionDir)) GTEST_SKIP() << kFashionDir << " not installed (dataset-fashion-mnist)";
  ringtrain::data::Dataset ds = load_dataset("fashion");
  EXPECT_EQ(ds.dir, kFashionDir);
  EXPECT_EQ(ds.train.count, 60000);
  EXPECT_EQ(ds.test.count, 10000);
  EXPECT_EQ(ds.train.rows, 28);
  EXPECT_EQ(ds.train.cols, 28);
  EXPECT_EQ(ds.train.images.size(), 60000u * 784u);
  // Fashion-MNIST is balanced: 6,000 train and 1,000 test images a class.
  std::array<int, 10> train_hist{}, test_hist{};
  for (uint8_t l : ds.train.labels) ++train_hist[l];
  for (uint8_t l : ds.test.labels) ++test_hist[l];
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_hist[std::size_t(c)], 6000) << "class " << c;
    EXPECT_EQ(test_hist[std::size_t(c)], 1000) << "class " << c;
  }
  // Real images, not blank: a fair share of nonzero pixels.
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < 784u * 100; ++i) nonzero += ds.test.images[i] != 0;
  EXPECT_GT(nonzero, 784u * 100 / 5);
}
