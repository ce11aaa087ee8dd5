#include "ringtrain/data/idx.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "ringtrain/core/error.h"
#include "ringtrain/data/atomic_file.h"
#include "ringtrain/data/byte_source.h"
#include "ringtrain/data/gzip_whole.h"

namespace ringtrain::data {

namespace {

constexpr uint8_t kTypeUbyte = 0x08;

const char* type_name(uint8_t code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type code";
  }
}

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

// Reads until n bytes or the end of the source; returns how many were read.
std::size_t read_full(ByteSource& src, uint8_t* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    std::size_t got = src.read(dst + done, n - done);
    if (got == 0) break;
    done += got;
  }
  return done;
}

// What a gzip file says its decompressed size is: the last member's ISIZE trailer (the size mod 2^32),
// with the compressed size, which bounds what any deflate stream can expand to (at most 1032:1).
struct GzipSizeHint {
  bool known = false;
  uint32_t isize = 0;
  uint64_t compressed = 0;
  // True when a stream of `bytes` is what the trailer says and a deflate stream of this size can hold it.
  bool agrees(uint64_t bytes) const {
    return known && uint32_t(bytes) == isize && bytes <= 1032 * compressed + 4096;
  }
};

GzipSizeHint gzip_hint(const uint8_t* last4, uint64_t compressed) {
  GzipSizeHint h;
  h.known = compressed >= 18;  // the smallest gzip member: 10-byte header, 8-byte trailer
  h.isize = uint32_t(last4[0]) | uint32_t(last4[1]) << 8 | uint32_t(last4[2]) << 16 | uint32_t(last4[3]) << 24;
  h.compressed = compressed;
  return h;
}

GzipSizeHint gzip_hint_of_file(const std::string& path, uint64_t size) {
  uint8_t last4[4] = {0, 0, 0, 0};
  std::FILE* f = size >= 18 ? std::fopen(path.c_str(), "rb") : nullptr;
  if (!f) return {};
  const bool ok = std::fseek(f, -4, SEEK_END) == 0 && std::fread(last4, 1, 4, f) == 4;
  std::fclose(f);
  return ok ? gzip_hint(last4, size) : GzipSizeHint{};
}

// Parses the IDX stream in src. file_size is the raw file's size (lets size errors be reported before
// anything is allocated), or 0 when unknown (gzip, memory-mapped input goes through MemorySource too).
// hint: a gzip file's own word on the decompressed size; when it agrees with the header, the payload is
// read into one buffer of its size (else the buffer grows by doubling as data arrives, so a corrupt small
// file claiming huge dims fails as truncated without first allocating them: Fashion-MNIST's 47 MB took
// 0.35 s of copies and page faults that way, more than decompressing it).
IdxArray parse_stream(ByteSource& src, const std::string& name, uint64_t file_size, bool gzip,
                      bool header_only = false, const GzipSizeHint& hint = {}) {
  const std::string where = gzip ? " (after gzip decompression)" : "";
  uint8_t header[4];
  std::size_t got = read_full(src, header, 4);
  if (got == 0) throw Error(name + ": empty file" + where + ", not an IDX file");
  if (got < 4)
    throw Error(name + ": truncated header: " + std::to_string(got) + " byte(s)" + where +
                ", an IDX header needs at least 4");
  if (header[0] != 0 || header[1] != 0)
    throw Error(name + ": bad magic: not an IDX file (the first two bytes are " + hex_byte(header[0]) + " " +
                hex_byte(header[1]) + ", expected 0x00 0x00, or 0x1F 0x8B for gzip)");
  if (header[2] != kTypeUbyte)
    throw Error(name + ": unsupported data type code " + hex_byte(header[2]) + " (" + type_name(header[2]) +
                "); only 0x08 (unsigned byte) is supported");
  const int ndims = header[3];
  if (ndims < 1 || ndims > kIdxMaxDims)
    throw Error(name + ": bad number of dimensions " + std::to_string(ndims) + " (supported: 1 to " +
                std::to_string(kIdxMaxDims) + ")");

  const std::size_t header_bytes = 4 + 4 * std::size_t(ndims);
  uint8_t dim_bytes[4 * kIdxMaxDims];
  got = read_full(src, dim_bytes, 4 * std::size_t(ndims));
  if (got < 4 * std::size_t(ndims))
    throw Error(name + ": truncated header: " + std::to_string(ndims) + " dimensions need a " +
                std::to_string(header_bytes) + "-byte header, the data" + where + " has only " +
                std::to_string(4 + got) + " bytes");

  IdxArray out;
  uint64_t product = 1;
  bool overflow = false;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* b = dim_bytes + 4 * i;
    uint64_t d = (uint64_t(b[0]) << 24) | (uint64_t(b[1]) << 16) | (uint64_t(b[2]) << 8) | uint64_t(b[3]);
    if (d == 0)
      throw Error(name + ": dimension " + std::to_string(i + 1) + " of " + std::to_string(ndims) +
                  " is 0; every dimension must be positive");
    out.dims.push_back(int64_t(d));
    if (!overflow && __builtin_mul_overflow(product, d, &product)) overflow = true;
  }
  if (overflow)
    throw Error(name + ": dimensions " + idx_dims_str(out.dims) + " overflow a 64-bit size (corrupt header?)");
  if (product > kIdxMaxBytes)
    throw Error(name + ": dimensions " + idx_dims_str(out.dims) + " describe " + std::to_string(product) +
                " bytes, too large (the limit is " + std::to_string(kIdxMaxBytes) + "; corrupt header?)");

  const std::string need = "dimensions " + idx_dims_str(out.dims) + " need " + std::to_string(product) +
                           " data bytes after the " + std::to_string(header_bytes) + "-byte header";
  if (file_size > 0) {
    uint64_t have = file_size - std::min<uint64_t>(file_size, header_bytes);
    if (have < product)
      throw Error(name + ": truncated data: " + need + ", the file has only " + std::to_string(have));
    if (have > product)
      throw Error(name + ": " + std::to_string(have - product) + " trailing bytes: " + need +
                  ", the file has " + std::to_string(have));
  }

  if (header_only) return out;  // the caller maps the payload itself (sizes checked above)

  // Grow the buffer as data arrives (at most doubling), so a small file claiming huge dims fails as
  // truncated without first allocating what its header claims; or all at once when the gzip trailer agrees.
  std::size_t filled = 0;
  std::size_t target = std::size_t(hint.agrees(header_bytes + product) ? product : std::min<uint64_t>(product, 1u << 20));
  while (filled < product) {
    out.data.resize(target);
    std::size_t n = read_full(src, out.data.data() + filled, target - filled);
    filled += n;
    if (filled < target) break;
    target = std::size_t(std::min<uint64_t>(product, uint64_t(target) * 2));
  }
  if (filled < product)
    throw Error(name + ": truncated data: " + need + ", only " + std::to_string(filled) + " follow" + where);
  uint8_t extra;
  if (read_full(src, &extra, 1) != 0)
    throw Error(name + ": trailing bytes after the data: " + need + where + ", and more follow");
  return out;
}

IdxArray parse_source(ByteSource& src, const std::string& name, uint64_t file_size, const GzipSizeHint& hint) {
  uint8_t head[2];
  std::size_t got = read_full(src, head, 2);
  if (is_gzip_magic(head, got)) {
    GzipSource gz(head, got, src, name);
    return parse_stream(gz, name, 0, true, false, hint);
  }
  PrefixedSource raw(head, got, src);
  return parse_stream(raw, name, file_size, false);
}

// madvise(MADV_HUGEPAGE) on the whole 2 MiB pages inside [p, p + n): a hint, ignored where THP is off.
void advise_huge_pages(void* p, std::size_t n) {
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// A gzip file held whole in memory, at once (data/gzip_whole.h): the IDX header through zlib as usual, then,
// when the gzip trailer agrees with the size it gives, the whole member with libdeflate straight into the
// array's buffer. nullopt: the streaming path instead, which also reports every error.
std::optional<IdxArray> parse_whole_gzip(const uint8_t* bytes, std::size_t size, const std::string& name) {
  if (size < 18 || !is_gzip_magic(bytes, size)) return std::nullopt;
  const GzipSizeHint hint = gzip_hint(bytes + size - 4, size);
  IdxArray out;
  try {
    MemorySource rest(bytes + 2, size - 2);
    GzipSource gz(bytes, 2, rest, name);
    out = parse_stream(gz, name, 0, true, true, hint);
  } catch (const Error&) {
    return std::nullopt;
  }
  const std::size_t header_bytes = 4 + 4 * out.dims.size();
  uint64_t product = 1;
  for (int64_t d : out.dims) product *= uint64_t(d);  // parse_stream refused overflow and oversize
  if (!hint.agrees(header_bytes + product)) return std::nullopt;
  // Huge pages for the buffer where the kernel allows them: Fashion-MNIST's 47 MB took 11,500 page faults
  // of 4 KiB, more time than decompressing it.
  const std::size_t n = std::size_t(header_bytes + product);
  out.data.reserve(n);
  advise_huge_pages(out.data.data(), n);
  out.data.resize(n);
  if (!inflate_whole_gzip(bytes, size, out.data.data(), out.data.size())) return std::nullopt;
  out.data.erase(out.data.begin(), out.data.begin() + std::ptrdiff_t(header_bytes));
  return out;
}

// The file's `size` bytes mapped read-only, unmapped when the last copy of the pointer goes.
std::shared_ptr<const uint8_t> map_read_only(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, path + ": cannot open for mapping");
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  check(p != MAP_FAILED, path + ": cannot map into memory");
  return std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(p),
                                        [size](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), size); });
}

// The same for a file: mapped read-only for the decompressor (nullopt where it cannot be mapped).
std::optional<IdxArray> read_whole_gzip(const std::string& path, uint64_t size) {
  if (size < 18) return std::nullopt;
  std::shared_ptr<const uint8_t> bytes;
  try {
    bytes = map_read_only(path, std::size_t(size));
  } catch (const Error&) {
    return std::nullopt;  // the streaming reader then opens it and reports what is wrong
  }
  ::madvise(const_cast<uint8_t*>(bytes.get()), std::size_t(size), MADV_SEQUENTIAL);
  return parse_whole_gzip(bytes.get(), std::size_t(size), path);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Deflates into an AtomicFile as a single gzip member.
class GzipWriter {
 public:
  GzipWriter(AtomicFile& file, const std::string& path) : file_(file), path_(path) {
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw Error(path_ + ": cannot start gzip compression");
  }
  ~GzipWriter() { deflateEnd(&zs_); }
  void write(const uint8_t* data, std::size_t size, bool last) {
    do {
      std::size_t piece = std::min<std::size_t>(size, 1u << 30);
      zs_.next_in = const_cast<uint8_t*>(data);
      zs_.avail_in = uInt(piece);
      data += piece;
      size -= piece;
      int flush = (last && size == 0) ? Z_FINISH : Z_NO_FLUSH;
      int ret;
      do {
        zs_.next_out = out_;
        zs_.avail_out = sizeof out_;
        ret = deflate(&zs_, flush);
        if (ret == Z_STREAM_ERROR) throw Error(path_ + ": gzip compression failed");
        file_.write(out_, sizeof out_ - zs_.avail_out);
      } while (zs_.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
    } while (size > 0);
  }

 private:
  AtomicFile& file_;
  std::string path_;
  z_stream zs_{};
  uint8_t out_[1 << 16];
};

}  // namespace

std::string idx_dims_str(const std::vector<int64_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += " x ";
    s += std::to_string(dims[i]);
  }
  return s;
}

IdxArray read_idx(const std::string& path) {
  FileSource file(path);
  if (std::optional<IdxArray> whole = read_whole_gzip(path, file.size())) return std::move(*whole);
  return parse_source(file, path, file.size(), gzip_hint_of_file(path, file.size()));
}

MappedIdx map_idx(const std::string& path) {
  MappedIdx out;
  FileSource file(path);
  uint8_t head[2] = {0, 0};
  const std::size_t got = read_full(file, head, 2);
  if (is_gzip_magic(head, got) || file.size() == 0) {
    // Compressed (or empty: let the parser say so): decompress into memory.
    auto owned = std::make_shared<IdxArray>(read_idx(path));
    out.dims = owned->dims;
    out.data = owned->data.data();
    out.keep_alive = owned;
    return out;
  }
  const std::size_t size = std::size_t(file.size());
  const std::shared_ptr<const uint8_t> mapping = map_read_only(path, size);
  const uint8_t* bytes = mapping.get();
  MemorySource mem(bytes, size);
  // The header is validated against the file's size exactly as read_idx does; the payload stays mapped.
  IdxArray header = parse_stream(mem, path, size, false, true);
  ::madvise(const_cast<uint8_t*>(bytes), size, MADV_WILLNEED);
  out.dims = header.dims;
  out.data = bytes + 4 + 4 * header.dims.size();
  out.keep_alive = mapping;
  out.mapped = true;
  return out;
}

IdxArray parse_idx(const uint8_t* bytes, std::size_t size, const std::string& name) {
  if (std::optional<IdxArray> whole = parse_whole_gzip(bytes, size, name)) return std::move(*whole);
  MemorySource mem(bytes, size);
  // A memory buffer's size is known exactly, like a regular file's (0 means empty, reported as such).
  return parse_source(mem, name, size, size >= 18 ? gzip_hint(bytes + size - 4, size) : GzipSizeHint{});
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const uint8_t* data) {
  check(!dims.empty() && dims.size() <= std::size_t(kIdxMaxDims),
        path + ": cannot write " + std::to_string(dims.size()) + " dimensions to IDX (supported: 1 to 4)");
  uint64_t product = 1;
  std::vector<uint8_t> header = {0, 0, kTypeUbyte, uint8_t(dims.size())};
  for (int64_t d : dims) {
    check(d > 0 && d <= int64_t(UINT32_MAX),
          path + ": cannot write dimensions " + idx_dims_str(dims) + " to IDX (each must be 1 to 2^32-1)");
    check(product <= kIdxMaxBytes / uint64_t(d),
          path + ": cannot write dimensions " + idx_dims_str(dims) + " to IDX (more than " +
              std::to_string(kIdxMaxBytes) + " bytes)");
    product *= uint64_t(d);
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(uint8_t(uint64_t(d) >> shift));
  }
  check(data != nullptr, path + ": no data to write");
  AtomicFile file(path);
  if (ends_with(path, ".gz")) {
    GzipWriter gz(file, path);
    gz.write(header.data(), header.size(), false);
    gz.write(data, std::size_t(product), true);
  } else {
    file.write(header.data(), header.size());
    file.write(data, std::size_t(product));
  }
  file.commit();
}

}  // namespace ringtrain::data
