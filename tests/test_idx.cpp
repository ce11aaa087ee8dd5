// IDX reader and writer: round trips (raw, gzip, by magic not by name), atomic writes, and every kind
// of corrupt file, each of which must give an Error naming the file and the problem, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/data/gzip_whole.h"
#include "ringtrain/data/idx.h"

namespace fs = std::filesystem;
using ringtrain::Error;
using ringtrain::Rng;
using namespace ringtrain::data;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh directory per test, removed afterwards.
class Idx : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(RINGTRAIN_BINARY_DIR) / "test_tmp" / ("idx_" + std::string(info->name()) + "_" +
                                                          std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

Bytes gzip(const Bytes& raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, uLong(raw.size())) + 64);
  zs.next_in = const_cast<uint8_t*>(raw.data());
  zs.avail_in = uInt(raw.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A valid uint8 IDX file: header, big-endian dims, then data 0, 1, 2, ... (mod 251).
Bytes idx_bytes(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  Bytes b = {0, 0, type, uint8_t(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i) b.push_back(uint8_t(i % 251));
  return b;
}

// Expects read_idx(path) to throw an Error whose one-line message names the file and contains phrase.
void expect_idx_error(const std::string& path, const std::string& phrase) {
  try {
    read_idx(path);
    FAIL() << path << ": read_idx accepted a bad file (expected '" << phrase << "')";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message does not start with the file: " << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

void expect_bad_bytes(const std::string& path, const Bytes& bytes, const std::string& phrase) {
  write_bytes(path, bytes);
  expect_idx_error(path, phrase);
}

std::vector<uint8_t> pattern(std::size_t n, uint32_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng.next_u32());
  return v;
}

}  // namespace

TEST_F(Idx, RoundTripRawEveryRank) {
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {4, 28, 28}, {2, 3, 4, 5}};
  for (const auto& dims : shapes) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    auto data = pattern(std::size_t(n), uint32_t(n));
    std::string p = path("a-idx" + std::to_string(dims.size()) + "-ubyte");
    write_idx(p, dims, data.data());
    IdxArray back = read_idx(p);
    EXPECT_EQ(back.dims, dims);
    EXPECT_EQ(back.data, data);
    // The bytes on disk are exactly the format: magic, type 0x08, ndims, big-endian dims, data.
    Bytes disk = read_bytes(p);
    ASSERT_EQ(disk.size(), 4 + 4 * dims.size() + std::size_t(n));
    EXPECT_EQ(disk[0], 0);
    EXPECT_EQ(disk[1], 0);
    EXPECT_EQ(disk[2], 0x08);
    EXPECT_EQ(disk[3], dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      uint32_t d = (uint32_t(disk[4 + 4 * i]) << 24) | (disk[5 + 4 * i] << 16) | (disk[6 + 4 * i] << 8) | disk[7 + 4 * i];
      EXPECT_EQ(int64_t(d), dims[i]);
    }
  }
}

TEST_F(Idx, RoundTripGzip) {
  std::vector<int64_t> dims = {10, 28, 28};
  auto data = pattern(10 * 28 * 28, 5);
  std::string p = path("images-idx3-ubyte.gz");
  write_idx(p, dims, data.data());
  Bytes disk = read_bytes(p);
  ASSERT_GE(disk.size(), 2u);
  EXPECT_EQ(disk[0], 0x1f);
  EXPECT_EQ(disk[1], 0x8b);
  IdxArray back = read_idx(p);
  EXPECT_EQ(back.dims, dims);
  EXPECT_EQ(back.data, data);
}

// Past the first MiB the reader takes the size from the gzip trailer (one buffer) when it agrees with
// the header; the bytes must be the same as through the growing buffer, from a file and from memory.
TEST_F(Idx, LargeGzipReadInOneBufferIsExact) {
  std::vector<int64_t> dims = {3000, 28, 28};  // 2.35 MB: past the growing buffer's first 1 MiB
  auto data = pattern(3000 * 28 * 28, 11);
  std::string p = path("large-idx3-ubyte.gz");
  write_idx(p, dims, data.data());
  IdxArray back = read_idx(p);
  EXPECT_EQ(back.dims, dims);
  EXPECT_EQ(back.data, data);
  Bytes disk = read_bytes(p);
  IdxArray mem = parse_idx(disk.data(), disk.size(), "memory");
  EXPECT_EQ(mem.data, data);
  // The trailer forged to agree with a header claiming 2^33 bytes: the claim is still not allocated (a
  // 40-byte deflate stream cannot hold it), and the file fails with its own error.
  Bytes claim = gzip({0, 0, 8, 2, 0, 1, 0, 0, 0, 2, 0, 0, 1, 2, 3});
  const uint32_t forged = uint32_t(12 + (uint64_t(1) << 33));
  for (int i = 0; i < 4; ++i) claim[claim.size() - 4 + std::size_t(i)] = uint8_t(forged >> (8 * i));
  expect_bad_bytes(path("forged-trailer.gz"), claim, "gzip");
}

TEST_F(Idx, GzipIsDetectedByMagicNotByName) {
  Bytes raw = idx_bytes({6, 2, 3});
  write_bytes(path("gzip-without-suffix"), gzip(raw));
  write_bytes(path("raw-with-suffix.gz"), raw);
  IdxArray a = read_idx(path("gzip-without-suffix"));
  IdxArray b = read_idx(path("raw-with-suffix.gz"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{6, 2, 3}));
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.data, Bytes(raw.begin() + 16, raw.end()));
}

TEST_F(Idx, ConcatenatedGzipMembersAreOneStream) {
  Bytes raw = idx_bytes({100, 7});
  Bytes first(raw.begin(), raw.begin() + 300), second(raw.begin() + 300, raw.end());
  Bytes both = gzip(first), tail = gzip(second);
  both.insert(both.end(), tail.begin(), tail.end());
  write_bytes(path("two-members.gz"), both);
  IdxArray a = read_idx(path("two-members.gz"));
  EXPECT_EQ(a.data, Bytes(raw.begin() + 12, raw.end()));
}

// The one-shot decoder behind single-member files (data/gzip_whole.h) takes only the simple case: one
// member of exactly the expected size, every byte used; the rest is left to the streaming reader, whose
// errors the tests below check.
TEST_F(Idx, WholeGzipDecoderTakesOnlySingleMembersOfTheExpectedSize) {
  const Bytes raw = idx_bytes({100, 7}), gz = gzip(raw);
  Bytes out(raw.size());
  EXPECT_TRUE(inflate_whole_gzip(gz.data(), gz.size(), out.data(), out.size()));
  EXPECT_EQ(out, raw);
  EXPECT_FALSE(inflate_whole_gzip(gz.data(), gz.size(), out.data(), out.size() - 1)) << "output too small";
  Bytes bigger(raw.size() + 1);
  EXPECT_FALSE(inflate_whole_gzip(gz.data(), gz.size(), bigger.data(), bigger.size())) << "short output";
  Bytes two = gzip(Bytes(raw.begin(), raw.begin() + 300)), rest = gzip(Bytes(raw.begin() + 300, raw.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_FALSE(inflate_whole_gzip(two.data(), two.size(), out.data(), out.size())) << "two members";
  Bytes garbage = gz;
  garbage.push_back('x');
  EXPECT_FALSE(inflate_whole_gzip(garbage.data(), garbage.size(), out.data(), out.size())) << "trailing bytes";
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0x5a;
  EXPECT_FALSE(inflate_whole_gzip(bad_crc.data(), bad_crc.size(), out.data(), out.size())) << "bad CRC";
  EXPECT_FALSE(inflate_whole_gzip(gz.data(), gz.size() / 2, out.data(), out.size())) << "truncated";
}

TEST_F(Idx, ParseFromMemoryMatchesFile) {
  Bytes raw = idx_bytes({5, 4});
  IdxArray a = parse_idx(raw.data(), raw.size(), "mem");
  Bytes gz = gzip(raw);
  IdxArray b = parse_idx(gz.data(), gz.size(), "mem.gz");
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.data, b.data);
  EXPECT_THROW(parse_idx(raw.data(), raw.size() - 1, "mem"), Error);
  EXPECT_THROW(parse_idx(nullptr, 0, "mem"), Error);
}

TEST_F(Idx, WriteReplacesAtomicallyAndLeavesNoTemporary) {
  std::string p = path("labels-idx1-ubyte");
  Bytes first = {1, 2, 3}, second = {9, 8, 7, 6, 5};
  write_idx(p, {3}, first.data());
  write_idx(p, {5}, second.data());
  EXPECT_EQ(read_idx(p).data, second);
  // A write refused for its dims leaves the old file as it was.
  EXPECT_THROW(write_idx(p, {0}, second.data()), Error);
  EXPECT_EQ(read_idx(p).data, second);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "labels-idx1-ubyte") << "left behind: " << entry.path();
  }
  EXPECT_EQ(files, 1);
}

TEST_F(Idx, WriteRejectsDimsTheFormatCannotHold) {
  uint8_t byte = 0;
  std::string p = path("x");
  const std::vector<std::vector<int64_t>> bad = {
      {}, {1, 1, 1, 1, 1}, {0}, {3, -1}, {int64_t(1) << 32}, {1 << 20, 1 << 20}};
  for (const auto& dims : bad) {
    try {
      write_idx(p, dims, &byte);
      FAIL() << "write_idx accepted dims " << idx_dims_str(dims);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(p + ": ", 0), 0u) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_THROW(write_idx(path("no-such-dir/x"), {1}, &byte), Error);
}

TEST_F(Idx, EmptyFile) { expect_bad_bytes(path("empty"), {}, "empty file"); }

TEST_F(Idx, OneToThreeBytes) {
  expect_bad_bytes(path("one"), {0}, "truncated header");
  expect_bad_bytes(path("two"), {0, 0}, "truncated header");
  expect_bad_bytes(path("three"), {0, 0, 8}, "truncated header");
  expect_bad_bytes(path("one-nonzero"), {0x1f}, "truncated header");
}

TEST_F(Idx, BadMagic) {
  Bytes b = idx_bytes({4});
  b[0] = 0x12;
  expect_bad_bytes(path("magic0"), b, "bad magic");
  b[0] = 0;
  b[1] = 0x01;
  expect_bad_bytes(path("magic1"), b, "bad magic");
  expect_bad_bytes(path("text"), {'h', 'e', 'l', 'l', 'o', '\n'}, "bad magic");
}

TEST_F(Idx, UnsupportedDataTypeIsNamed) {
  expect_bad_bytes(path("float"), idx_bytes({4}, 0x0D), "unsupported data type code 0x0D (float32)");
  expect_bad_bytes(path("int32"), idx_bytes({4}, 0x0C), "unsupported data type code 0x0C (int32)");
  expect_bad_bytes(path("sbyte"), idx_bytes({4}, 0x09), "unsupported data type code 0x09 (signed byte)");
  expect_bad_bytes(path("junk"), idx_bytes({4}, 0x42), "unsupported data type code 0x42");
}

TEST_F(Idx, BadNumberOfDims) {
  expect_bad_bytes(path("zero-dims"), {0, 0, 8, 0}, "bad number of dimensions 0");
  expect_bad_bytes(path("five-dims"), idx_bytes({1, 1, 1, 1, 1}), "bad number of dimensions 5");
  expect_bad_bytes(path("255-dims"), {0, 0, 8, 255, 0, 0, 0, 1}, "bad number of dimensions 255");
}

TEST_F(Idx, TruncatedDimensions) {
  Bytes b = idx_bytes({2, 3, 4});
  b.resize(4 + 4 + 2);
  expect_bad_bytes(path("short-dims"), b, "truncated header: 3 dimensions need a 16-byte header");
}

TEST_F(Idx, ZeroDimension) {
  expect_bad_bytes(path("zero-dim"), {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4}, "dimension 2 of 3 is 0");
}

TEST_F(Idx, OverflowingAndAbsurdDims) {
  expect_bad_bytes(path("overflow"), {0, 0, 8, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff},
                   "overflow a 64-bit size");
  // 65536^3 = 2^48 bytes: no overflow, but far beyond the limit, with a 16-byte file behind it.
  expect_bad_bytes(path("huge"), {0, 0, 8, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0}, "too large");
}

TEST_F(Idx, TruncatedPayload) {
  Bytes b = idx_bytes({10, 28, 28});
  b.resize(b.size() - 1);
  expect_bad_bytes(path("truncated"), b, "truncated data: dimensions 10 x 28 x 28 need 7840 data bytes");
  // Header promising 2^33 bytes on a tiny file: reported without allocating what the header claims.
  expect_bad_bytes(path("claims-8GiB"), {0, 0, 8, 2, 0, 1, 0, 0, 0, 2, 0, 0, 1, 2, 3}, "truncated data");
}

TEST_F(Idx, TrailingBytes) {
  Bytes b = idx_bytes({10, 28, 28});
  b.push_back(0);
  b.push_back(0);
  expect_bad_bytes(path("trailing"), b, "2 trailing bytes");
}

TEST_F(Idx, SizeErrorsInsideGzip) {
  Bytes b = idx_bytes({10, 28, 28});
  Bytes shorter(b.begin(), b.end() - 5), longer = b;
  longer.push_back(7);
  expect_bad_bytes(path("truncated.gz"), gzip(shorter), "truncated data");
  expect_idx_error(path("truncated.gz"), "after gzip decompression");
  expect_bad_bytes(path("trailing.gz"), gzip(longer), "trailing bytes");
  expect_idx_error(path("trailing.gz"), "after gzip decompression");
  expect_bad_bytes(path("empty-inside.gz"), gzip({}), "empty file (after gzip decompression)");
  expect_bad_bytes(path("magic-inside.gz"), gzip({1, 2, 3, 4, 5}), "bad magic");
  // 2^33 bytes claimed, a few present: fails as truncated without allocating the claim.
  expect_bad_bytes(path("claims-8GiB.gz"), gzip({0, 0, 8, 2, 0, 1, 0, 0, 0, 2, 0, 0, 1, 2, 3}), "truncated data");
}

TEST_F(Idx, CorruptGzip) {
  Bytes gz = gzip(idx_bytes({50, 28, 28}));
  // An invalid deflate block right after a valid gzip header.
  Bytes bad_block = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  expect_bad_bytes(path("bad-block.gz"), bad_block, "corrupt gzip stream");
  // A wrong CRC in the trailer.
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0x5a;
  expect_bad_bytes(path("bad-crc.gz"), bad_crc, "corrupt gzip stream");
  // An unknown compression method in the header.
  Bytes bad_method = gz;
  bad_method[2] = 7;
  expect_bad_bytes(path("bad-method.gz"), bad_method, "corrupt gzip stream");
  // Garbage after the stream.
  Bytes garbage = gz;
  garbage.push_back('x');
  garbage.push_back('y');
  expect_bad_bytes(path("garbage-after.gz"), garbage, "trailing bytes after the end of the gzip stream");
}

TEST_F(Idx, TruncatedGzip) {
  Bytes gz = gzip(idx_bytes({50, 28, 28}));
  expect_bad_bytes(path("no-trailer.gz"), Bytes(gz.begin(), gz.end() - 4), "truncated gzip stream");
  expect_bad_bytes(path("half.gz"), Bytes(gz.begin(), gz.begin() + gz.size() / 2), "truncated gzip stream");
  expect_bad_bytes(path("magic-only.gz"), {0x1f, 0x8b}, "truncated gzip stream");
}

TEST_F(Idx, MissingFileAndDirectory) {
  expect_idx_error(path("does-not-exist"), "cannot open");
  fs::create_directories(path("a-directory"));
  expect_idx_error(path("a-directory"), "is a directory");
}

// Every prefix of valid raw and gzip files, and many random corruptions of them: each parses to a
// consistent array or throws Error; nothing else (the sanitizer build turns any bad read into a failure).
TEST_F(Idx, NeverCrashesOnTruncationsOrMutations) {
  Bytes raw = idx_bytes({3, 5, 7});
  Bytes gz = gzip(raw);
  auto consistent = [](const IdxArray& a) {
    uint64_t n = 1;
    for (int64_t d : a.dims) n *= uint64_t(d);
    return !a.dims.empty() && a.dims.size() <= 4 && a.data.size() == n;
  };
  int parsed = 0, refused = 0;
  for (const Bytes* src : {&raw, &gz}) {
    for (std::size_t len = 0; len < src->size(); ++len) {
      EXPECT_THROW(parse_idx(src->data(), len, "prefix"), Error) << "prefix of " << len << " bytes";
    }
    Rng rng(42);
    for (int trial = 0; trial < 3000; ++trial) {
      Bytes b = *src;
      int edits = 1 + int(rng.below(4));
      for (int e = 0; e < edits; ++e) {
        uint32_t kind = rng.below(3), at = rng.below(uint32_t(b.size()));
        if (kind == 0) b[at] = uint8_t(rng.next_u32());
        else if (kind == 1 && b.size() > 1) b.erase(b.begin() + at);
        else b.insert(b.begin() + at, uint8_t(rng.next_u32()));
      }
      try {
        IdxArray a = parse_idx(b.data(), b.size(), "mutant");
        EXPECT_TRUE(consistent(a));
        ++parsed;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("mutant: ", 0), 0u) << e.what();
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(parsed, 0);  // byte flips inside the payload of the raw file still parse
}
