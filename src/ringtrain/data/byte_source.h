// Byte sources for the file readers: a file, a memory buffer, and a gzip decompressor layered over
// either. read() returns fewer bytes than asked only at the end of the data; every failure (an
// unreadable file, a corrupt or truncated gzip stream) is an Error naming the source, so a parser on
// top of these never sees an unchecked read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace ringtrain::data {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into dst; returns how many were read (< n only at the end of the data).
  virtual std::size_t read(uint8_t* dst, std::size_t n) = 0;
};

// A regular file, opened for reading. Throws Error if it is missing, unreadable or a directory.
class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  std::size_t read(uint8_t* dst, std::size_t n) override;
  uint64_t size() const { return size_; }  // the file's size in bytes when it was opened

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

// A borrowed memory buffer (it must outlive the source).
class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::size_t read(uint8_t* dst, std::size_t n) override;

 private:
  const uint8_t* data_;
  std::size_t size_, pos_ = 0;
};

// Replays a few bytes already taken from `inner` (a peeked magic number), then reads on from inner.
class PrefixedSource : public ByteSource {
 public:
  PrefixedSource(const uint8_t* prefix, std::size_t prefix_size, ByteSource& inner);
  std::size_t read(uint8_t* dst, std::size_t n) override;

 private:
  uint8_t prefix_[8];
  std::size_t prefix_size_, prefix_pos_ = 0;
  ByteSource& inner_;
};

// Decompresses a gzip stream (one member or several concatenated, as gzip(1) allows) read from
// `inner`, whose first bytes are `prefix` (already taken from it). Checks every member's CRC and
// length. Throws Error("<name>: ...") for corrupt data, a stream that ends early, and anything after
// the last member that is not another gzip member.
class GzipSource : public ByteSource {
 public:
  GzipSource(const uint8_t* prefix, std::size_t prefix_size, ByteSource& inner, std::string name);
  ~GzipSource() override;
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;
  std::size_t read(uint8_t* dst, std::size_t n) override;

 private:
  bool refill();  // more compressed input; false at the end of inner
  struct State;
  std::unique_ptr<State> state_;
  ByteSource& inner_;
  std::string name_;
};

// True if the bytes start with the gzip magic 1f 8b.
inline bool is_gzip_magic(const uint8_t* bytes, std::size_t size) {
  return size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

}  // namespace ringtrain::data
