// IDX files (the MNIST format): a 4-byte header (two zero bytes, a data-type code, the number of
// dimensions), then one big-endian uint32 a dimension, then the data, row-major. Only unsigned bytes
// (type code 0x08) are supported: MNIST-style images and labels. Files may be gzip-compressed; the
// reader goes by the 1f 8b magic, not by the name.
//
// The reader validates everything and never reads unchecked: any byte sequence gives either an
// IdxArray whose data size equals the product of its dims, or an Error "<file>: <what is wrong>".
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringtrain::data {

struct IdxArray {
  std::vector<int64_t> dims;  // 1 to 4 dimensions, each > 0
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

constexpr int kIdxMaxDims = 4;
// The largest payload read or written (16 GiB): larger dims are taken as a corrupt header.
constexpr uint64_t kIdxMaxBytes = uint64_t(1) << 34;

// Reads a raw or gzip-compressed uint8 IDX file.
IdxArray read_idx(const std::string& path);

// A uint8 IDX file whose payload is memory-mapped read-only (raw files), or decompressed into memory
// (gzip files). Validated exactly as read_idx validates. data stays valid while keep_alive lives.
struct MappedIdx {
  std::vector<int64_t> dims;
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> keep_alive;
  bool mapped = false;  // true: data points into an mmap of the file
};
MappedIdx map_idx(const std::string& path);

// The same from bytes in memory (raw or gzip); `name` stands for the file in error messages.
IdxArray parse_idx(const uint8_t* bytes, std::size_t size, const std::string& name);

// Writes a uint8 IDX file, gzip-compressed if path ends in ".gz". Atomic: a temporary file in the
// same directory is written, fsynced and renamed over path. Throws Error for dims the format cannot
// hold (none, more than 4, a dimension <= 0 or >= 2^32, more than kIdxMaxBytes in all).
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const uint8_t* data);

// "60000 x 28 x 28"
std::string idx_dims_str(const std::vector<int64_t>& dims);

}  // namespace ringtrain::data
