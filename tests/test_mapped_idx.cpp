// Memory-mapped IDX loading: raw training files are mapped (not read whole), gzip ones decompressed;
// both give the same bytes, and a mapped split stays readable after the loader's copy is gone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/idx.h"

namespace ringtrain::data {
namespace {

std::string scratch(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("ringtrain_mapped_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(MappedIdx, RawIsMappedGzipIsDecompressedSameBytes) {
  std::vector<uint8_t> bytes(5 * 4 * 3);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 13);
  write_idx(scratch("a-idx3-ubyte"), {5, 4, 3}, bytes.data());
  write_idx(scratch("a-idx3-ubyte.gz"), {5, 4, 3}, bytes.data());
  MappedIdx raw = map_idx(scratch("a-idx3-ubyte")), gz = map_idx(scratch("a-idx3-ubyte.gz"));
  EXPECT_TRUE(raw.mapped);
  EXPECT_FALSE(gz.mapped);
  EXPECT_EQ(raw.dims, (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(gz.dims, raw.dims);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), raw.data));
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), gz.data));
}

TEST(MappedIdx, ValidatesLikeReadIdx) {
  std::vector<uint8_t> bytes(24, 7);
  write_idx(scratch("b-idx3-ubyte"), {2, 3, 4}, bytes.data());
  std::filesystem::resize_file(scratch("b-idx3-ubyte"), 16 + 20);
  try {
    map_idx(scratch("b-idx3-ubyte"));
    FAIL() << "a truncated file was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b-idx3-ubyte: truncated data"), std::string::npos) << e.what();
  }
  EXPECT_THROW(map_idx(scratch("missing-idx3-ubyte")), Error);
}

TEST(MappedIdx, LoadedSplitIsAViewThatOutlivesTheLoader) {
  const std::string dir = scratch("ds");
  std::filesystem::create_directories(dir);
  std::vector<uint8_t> images(3 * 28 * 28), labels = {1, 2, 3};
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = uint8_t(i);
  write_idx(dir + "/train-images-idx3-ubyte", {3, 28, 28}, images.data());
  write_idx(dir + "/train-labels-idx1-ubyte", {3}, labels.data());
  Split split = load_split(dir, "train");
  EXPECT_TRUE(split.images.is_view());
  Split copy = split;
  split = Split();
  EXPECT_EQ(copy.image(2)[5], uint8_t(2 * 784 + 5));
  copy.images[0] = 99;  // a write copies the mapping first, never writes to it
  EXPECT_FALSE(copy.images.is_view());
  EXPECT_EQ(copy.images[0], 99);
  EXPECT_EQ(load_split(dir, "train").images[0], 0);
}

}  // namespace
}  // namespace ringtrain::data
