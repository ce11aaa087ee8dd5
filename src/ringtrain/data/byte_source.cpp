#include "ringtrain/data/byte_source.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

#include "ringtrain/core/error.h"

namespace ringtrain::data {

// ---- FileSource ----

FileSource::FileSource(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fileno(file_), &st) != 0) {
    int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    throw Error(path + ": cannot stat: " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    std::fclose(file_);
    file_ = nullptr;
    throw Error(path + ": is a directory, not a file");
  }
  size_ = S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
}

FileSource::~FileSource() {
  if (file_) std::fclose(file_);
}

std::size_t FileSource::read(uint8_t* dst, std::size_t n) {
  std::size_t got = std::fread(dst, 1, n, file_);
  if (got < n && std::ferror(file_)) throw Error(path_ + ": read error: " + std::strerror(errno));
  return got;
}

// ---- MemorySource ----

std::size_t MemorySource::read(uint8_t* dst, std::size_t n) {
  std::size_t got = std::min(n, size_ - pos_);
  if (got) std::memcpy(dst, data_ + pos_, got);
  pos_ += got;
  return got;
}

// ---- PrefixedSource ----

PrefixedSource::PrefixedSource(const uint8_t* prefix, std::size_t prefix_size, ByteSource& inner)
    : prefix_size_(std::min(prefix_size, sizeof(prefix_))), inner_(inner) {
  if (prefix_size_) std::memcpy(prefix_, prefix, prefix_size_);
}

std::size_t PrefixedSource::read(uint8_t* dst, std::size_t n) {
  std::size_t from_prefix = std::min(n, prefix_size_ - prefix_pos_);
  if (from_prefix) std::memcpy(dst, prefix_ + prefix_pos_, from_prefix);
  prefix_pos_ += from_prefix;
  if (from_prefix == n) return n;
  return from_prefix + inner_.read(dst + from_prefix, n - from_prefix);
}

// ---- GzipSource ----

struct GzipSource::State {
  z_stream zs{};
  bool initialised = false;
  bool finished = false;  // every member decompressed and nothing follows
  static constexpr std::size_t kChunk = 1 << 16;
  uint8_t in[kChunk];
};

GzipSource::GzipSource(const uint8_t* prefix, std::size_t prefix_size, ByteSource& inner, std::string name)
    : state_(std::make_unique<State>()), inner_(inner), name_(std::move(name)) {
  State& s = *state_;
  prefix_size = std::min(prefix_size, State::kChunk);
  if (prefix_size) std::memcpy(s.in, prefix, prefix_size);
  s.zs.next_in = s.in;
  s.zs.avail_in = uInt(prefix_size);
  // 16 + MAX_WBITS: a gzip wrapper only (no raw deflate, no zlib header), CRC and length checked.
  if (inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK) throw Error(name_ + ": cannot start gzip decompression");
  s.initialised = true;
}

GzipSource::~GzipSource() {
  if (state_ && state_->initialised) inflateEnd(&state_->zs);
}

bool GzipSource::refill() {
  State& s = *state_;
  if (s.zs.avail_in > 0 && s.zs.next_in != s.in) std::memmove(s.in, s.zs.next_in, s.zs.avail_in);
  s.zs.next_in = s.in;
  std::size_t got = inner_.read(s.in + s.zs.avail_in, State::kChunk - s.zs.avail_in);
  s.zs.avail_in += uInt(got);
  return got > 0;
}

std::size_t GzipSource::read(uint8_t* dst, std::size_t n) {
  State& s = *state_;
  if (s.finished || n == 0) return 0;
  // zlib counts in uInt; larger requests are served in pieces by the loop below.
  std::size_t done = 0;
  while (done < n && !s.finished) {
    s.zs.next_out = dst + done;
    s.zs.avail_out = uInt(std::min<std::size_t>(n - done, 1u << 30));
    uInt asked = s.zs.avail_out;
    if (s.zs.avail_in == 0) refill();  // at the end of inner, inflate may still flush what it holds
    int ret = inflate(&s.zs, Z_NO_FLUSH);
    done += asked - s.zs.avail_out;
    if (ret == Z_STREAM_END) {
      // A member ended (its CRC and length matched). Another member may follow; anything else is an error.
      if (s.zs.avail_in < 2) refill();
      if (s.zs.avail_in == 0) {
        s.finished = true;
      } else if (!is_gzip_magic(s.zs.next_in, s.zs.avail_in)) {
        throw Error(name_ + ": trailing bytes after the end of the gzip stream");
      } else if (inflateReset(&s.zs) != Z_OK) {
        throw Error(name_ + ": cannot restart gzip decompression");
      }
    } else if (ret == Z_BUF_ERROR) {
      // No progress without more input: the compressed data stops before the stream's end.
      if (!refill()) throw Error(name_ + ": truncated gzip stream (the file ends inside the compressed data)");
    } else if (ret != Z_OK) {
      std::string why = s.zs.msg ? s.zs.msg : "error " + std::to_string(ret);
      throw Error(name_ + ": corrupt gzip stream (" + why + ")");
    }
  }
  return done;
}

}  // namespace ringtrain::data
