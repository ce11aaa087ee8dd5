// safetensors files (https://github.com/huggingface/safetensors), the checkpoint format:
//   8 bytes  little-endian uint64 H, the header length
//   H bytes  a JSON object: {"<name>": {"dtype": "F32", "shape": [6,1,5,5], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"<key>": "<string value>", ...}}   (metadata optional; padded with spaces)
//   rest     the byte buffer; data_offsets are relative to its start, little-endian, row-major.
// Reading validates everything (header length, JSON syntax, dtypes, shapes, offsets in range, no overlap or
// gap, sizes = numel * dtype size) and reports any problem as one line naming the file; it survives any
// byte sequence. Writing is atomic: a temporary file in the same directory, fsync, rename, fsync the folder.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ringtrain/core/tensor.h"

namespace ringtrain::train {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;  // numel * dtype_size(dtype) bytes, little-endian, row-major
};

struct SafetensorsFile {
  std::vector<SafetensorsTensor> tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
  // The tensor called name, or null.
  const SafetensorsTensor* find(const std::string& name) const;
};

// The safetensors dtype string ("F32", "BF16", ...) of t, and back (returns false if unknown).
const char* safetensors_dtype_name(DType t);
bool parse_safetensors_dtype(const std::string& s, DType* out);

// The whole file's bytes. Throws Error (naming `what`) on duplicate or empty names, the reserved name
// "__metadata__", negative dimensions, or a byte count that disagrees with the shape and dtype.
std::vector<uint8_t> serialize_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata,
                                           const std::string& what = "safetensors");
// Serialises and writes atomically; throws Error naming path.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Parses a file's bytes; `name` is the file name used in errors. Never reads outside [data, data+size).
SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size, const std::string& name);
// Reads and parses path; throws Error("<path>: <what is wrong>").
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace ringtrain::train
