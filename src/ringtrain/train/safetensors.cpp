// safetensors reading and writing. The JSON header is parsed and written by nlohmann-json (Debian's
// nlohmann-json3-dev); this file holds it to the subset a safetensors header uses and checks the layout
// (dtypes, shapes, offsets tiling the buffer), which no Debian library knows. Every error is one line:
// "<file>: <what is wrong>".
#include "ringtrain/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "ringtrain/core/error.h"
#include "ringtrain/core/json_error.h"

namespace ringtrain::train {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation: 100 MB
constexpr int kMaxJsonDepth = 32;

// The header's JSON, refused unless it keeps to what a safetensors header holds: objects, arrays,
// strings and integers that fit int64_t (no floats, true, false or null), no key twice in an object
// (nlohmann would keep the last silently), nested at most kMaxJsonDepth deep. nlohmann checks the
// syntax, escapes and UTF-8; the callback below sees every value as it is parsed.
json parse_header_json(const char* text, std::size_t size, const std::string& file) {
  const std::string where = file + ": bad JSON header: ";
  std::vector<std::set<std::string>> keys_seen;  // a set an open object: a 100 MB header must not be quadratic
  auto keep_to_subset = [&](int depth, json::parse_event_t event, json& value) {
    if (depth > kMaxJsonDepth) throw Error(where + "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    switch (event) {
      case json::parse_event_t::object_start: keys_seen.emplace_back(); break;
      case json::parse_event_t::object_end: keys_seen.pop_back(); break;
      case json::parse_event_t::key: {
        const std::string& key = value.get_ref<const std::string&>();
        if (!keys_seen.back().insert(key).second) throw Error(where + "duplicate key \"" + key + "\"");
        break;
      }
      case json::parse_event_t::value:
        if (value.is_boolean() || value.is_null())
          throw Error(where + "true, false and null have no place in a safetensors header");
        if (value.is_number_float()) {  // nlohmann reads an integer beyond 64 bits as a float
          const double v = value.get<double>();
          throw Error(where + (std::floor(v) == v && std::fabs(v) >= 0x1p63 ? "integer out of range"
                                                                               : "numbers in a safetensors header must be integers"));
        }
        if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
          throw Error(where + "integer out of range");
        break;
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text, text + size, keep_to_subset);
  } catch (const json::parse_error& e) {  // offsets in the file: the header starts after the 8-byte length
    throw Error(file + ": bad JSON header at byte " + std::to_string(8 + (e.byte > 0 ? e.byte - 1 : 0)) + ": " +
                json_error_text(e));
  } catch (const json::exception& e) {
    throw Error(where + json_error_text(e));
  }
}

// What the subset's values are called in errors.
const char* kind_name(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  return "an integer";
}

// Whether s is well-formed UTF-8 (JSON text must be, so the writer refuses what the reader would):
// nlohmann's dump() checks it.
bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// numel * dtype size, or false on overflow or a negative dimension.
bool tensor_nbytes(const Shape& shape, DType dtype, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  }
  if (__builtin_mul_overflow(n, uint64_t(dtype_size(dtype)), &n)) return false;
  if (n > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  *out = n;
  return true;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const char* safetensors_dtype_name(DType t) { return dtype_name(t); }

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::U8, DType::I32, DType::I64})
    if (s == dtype_name(t)) {
      *out = t;
      return true;
    }
  return false;
}

std::vector<uint8_t> serialize_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata,
                                           const std::string& what) {
  // ordered_json keeps the keys in insertion order: __metadata__ first, then the tensors as given, each
  // {"dtype", "shape", "data_offsets"}, as the reference implementation writes them.
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata)
    check(valid_utf8(k) && valid_utf8(v), what + ": metadata \"" + k + "\" is not valid UTF-8");
  if (!metadata.empty()) root["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    check(!t.name.empty(), what + ": a tensor has an empty name");
    check(t.name != "__metadata__", what + ": \"__metadata__\" cannot name a tensor");
    check(valid_utf8(t.name), what + ": tensor name '" + t.name + "' is not valid UTF-8");
    check(seen.insert(t.name).second, what + ": tensor '" + t.name + "' appears twice");
    uint64_t nbytes = 0;
    check(tensor_nbytes(t.shape, t.dtype, &nbytes),
          what + ": tensor '" + t.name + "' has a bad shape " + shape_str(t.shape));
    check(nbytes == t.bytes.size(), what + ": tensor '" + t.name + "' " + dtype_name(t.dtype) + " " +
                                        shape_str(t.shape) + " needs " + std::to_string(nbytes) +
                                        " bytes but has " + std::to_string(t.bytes.size()));
    root[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header = root.dump();
  while (header.size() % 8 != 0) header += ' ';  // the data then starts 8-byte aligned

  std::vector<uint8_t> out(8 + header.size() + offset);
  uint64_t h = header.size();
  std::memcpy(out.data(), &h, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  uint8_t* p = out.data() + 8 + header.size();
  for (const auto& t : tensors) {
    if (!t.bytes.empty()) std::memcpy(p, t.bytes.data(), t.bytes.size());
    p += t.bytes.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<uint8_t> bytes = serialize_safetensors(tensors, metadata, path);
  std::string dir = ".";
  std::size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, path + ": cannot create temporary file " + tmp + ": " + errno_text());
  auto fail = [&](const std::string& what) {
    std::string err = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + ": " + err);
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write failed");
    done += std::size_t(w);
  }
  if (::fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw Error(path + ": close failed: " + err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " into place: " + err);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  check(dfd >= 0, path + ": cannot open its directory to fsync it: " + errno_text());
  int rc = ::fsync(dfd);
  std::string err = errno_text();
  ::close(dfd);
  check(rc == 0, path + ": fsync of its directory failed: " + err);
}

SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size, const std::string& name) {
  check(size >= 8, name + ": truncated: " + std::to_string(size) +
                       " bytes, shorter than the 8-byte header length");
  uint64_t h = 0;
  std::memcpy(&h, data, 8);
  check(h <= kMaxHeaderBytes, name + ": header length " + std::to_string(h) + " exceeds the 100 MB limit");
  check(h <= size - 8, name + ": header length " + std::to_string(h) + " runs past the end of the file (" +
                           std::to_string(size) + " bytes)");
  check(h >= 2, name + ": header length " + std::to_string(h) + " is too small for a JSON object");
  const uint64_t buffer_size = size - 8 - h;

  const json root = parse_header_json(reinterpret_cast<const char*>(data + 8), std::size_t(h), name);
  check(root.is_object(), name + ": the JSON header is " + kind_name(root) + ", not an object");

  SafetensorsFile file;
  struct Span {
    uint64_t begin, end;
    std::size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [key, v] : root.items()) {
    if (key == "__metadata__") {
      check(v.is_object(), name + ": __metadata__ is " + kind_name(v) + ", not an object");
      for (const auto& [k, value] : v.items()) {
        check(value.is_string(),
              name + ": __metadata__ value of \"" + k + "\" is " + kind_name(value) + ", not a string");
        file.metadata[k] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = name + ": tensor '" + key + "'";
    check(!key.empty(), name + ": a tensor has an empty name");
    check(v.is_object(), where + " is described by " + kind_name(v) + ", not an object");
    for (const auto& field : v.items())
      check(field.key() == "dtype" || field.key() == "shape" || field.key() == "data_offsets",
            where + " has an unknown field \"" + field.key() + "\"");
    check(v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
          where + " lacks " + (!v.contains("dtype") ? "dtype" : !v.contains("shape") ? "shape" : "data_offsets"));
    const json &dtype = v["dtype"], &shape = v["shape"], &offsets = v["data_offsets"];
    SafetensorsTensor t;
    t.name = key;
    check(dtype.is_string(), where + ": dtype is " + kind_name(dtype) + ", not a string");
    check(parse_safetensors_dtype(dtype.get<std::string>(), &t.dtype),
          where + ": unsupported dtype \"" + dtype.get<std::string>() + "\" (known: F32 F64 BF16 F16 U8 I32 I64)");
    check(shape.is_array(), where + ": shape is " + kind_name(shape) + ", not an array");
    for (const json& d : shape) {
      check(d.is_number_integer(), where + ": shape holds " + kind_name(d) + ", not an integer");
      check(d.get<int64_t>() >= 0, where + ": negative dimension " + std::to_string(d.get<int64_t>()) + " in its shape");
      t.shape.push_back(d.get<int64_t>());
    }
    uint64_t nbytes = 0;
    check(tensor_nbytes(t.shape, t.dtype, &nbytes),
          where + ": shape " + shape_str(t.shape) + " overflows 64-bit sizes");
    check(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_integer() &&
              offsets[1].is_number_integer(),
          where + ": data_offsets must be an array of two integers");
    const int64_t b = offsets[0].get<int64_t>(), e = offsets[1].get<int64_t>();
    std::string offs = "[";  // appended piecewise: "[" + std::to_string() trips GCC 12's -Wrestrict (PR105651)
    offs += std::to_string(b);
    offs += ',';
    offs += std::to_string(e);
    offs += ']';
    check(b >= 0 && e >= b, where + ": bad data_offsets " + offs);
    check(uint64_t(e) <= buffer_size, where + ": data_offsets " + offs + " run past the " +
                                          std::to_string(buffer_size) + "-byte data buffer");
    check(uint64_t(e - b) == nbytes, where + ": data_offsets " + offs + " hold " + std::to_string(e - b) +
                                         " bytes but " + dtype_name(t.dtype) + " " + shape_str(t.shape) +
                                         " needs " + std::to_string(nbytes));
    spans.push_back({uint64_t(b), uint64_t(e), file.tensors.size()});
    file.tensors.push_back(std::move(t));
  }

  // The tensors must tile the buffer exactly: no overlap, no gap, nothing after the last one.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const SafetensorsTensor* prev = nullptr;
  for (const Span& s : spans) {
    const SafetensorsTensor& t = file.tensors[s.index];
    check(s.begin >= at, name + ": tensor '" + t.name + "' overlaps tensor '" + (prev ? prev->name : "") + "'");
    check(s.begin == at, name + ": " + std::to_string(s.begin - at) + " unused bytes before tensor '" + t.name +
                             "' at offset " + std::to_string(at));
    at = s.end;
    prev = &t;
  }
  check(at == buffer_size, name + ": " + std::to_string(buffer_size - at) +
                               " bytes after the last tensor's data (buffer of " + std::to_string(buffer_size) +
                               " bytes)");

  const uint8_t* buffer = data + 8 + h;
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(spans.size());
  for (const Span& s : spans) {
    SafetensorsTensor& t = file.tensors[s.index];
    t.bytes.assign(buffer + s.begin, buffer + s.end);
    ordered.push_back(std::move(t));
  }
  file.tensors = std::move(ordered);
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  std::vector<uint8_t> bytes(std::size_t(st.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::string err = r < 0 ? errno_text() : "file shrank while reading";
      ::close(fd);
      throw Error(path + ": read failed: " + err);
    }
    done += std::size_t(r);
  }
  ::close(fd);
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

}  // namespace ringtrain::train
