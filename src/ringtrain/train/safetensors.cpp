// safetensors reading and writing, with a small strict JSON parser for the header's subset of JSON
// (objects, arrays, strings, integers). Every error is one line: "<file>: <what is wrong>".
#include "ringtrain/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation: 100 MB
constexpr int kMaxJsonDepth = 32;

// ---------------------------------------------------------------------------------------------------------
// JSON (RFC 8259) restricted to what a safetensors header holds: no floats, true, false or null.

struct Json {
  enum class Kind { Object, Array, String, Integer };
  Kind kind = Kind::Object;
  std::string str;                 // String
  int64_t num = 0;                 // Integer
  std::vector<std::string> keys;   // Object keys, in order; values[i] belongs to keys[i]
  std::vector<Json> values;        // Object values or Array items
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::Object: return "an object";
    case Json::Kind::Array: return "an array";
    case Json::Kind::String: return "a string";
    case Json::Kind::Integer: return "an integer";
  }
  return "?";
}

class JsonParser {
 public:
  JsonParser(const char* text, std::size_t size, const std::string& file) : p_(text), n_(size), file_(file) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != n_) fail("unexpected data after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // Offsets are given in the file (the header starts after the 8-byte length).
    throw Error(file_ + ": bad JSON header at byte " + std::to_string(8 + pos_) + ": " + what);
  }

  void skip_ws() {
    while (pos_ < n_ && (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r')) ++pos_;
  }

  bool consume(char c) {
    if (pos_ < n_ && p_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const char* context) {
    if (!consume(c)) fail(std::string("expected '") + c + "' " + context);
  }

  Json parse_value(int depth) {
    if (depth > kMaxJsonDepth) fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (pos_ >= n_) fail("unexpected end of header");
    char c = p_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      Json v;
      v.kind = Json::Kind::String;
      v.str = parse_string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer();
    if (c == 't' || c == 'f' || c == 'n') fail("true, false and null have no place in a safetensors header");
    fail(std::string("unexpected character ") + describe(c));
  }

  static std::string describe(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", u);
    return buf;
  }

  Json parse_object(int depth) {
    Json v;
    v.kind = Json::Kind::Object;
    expect('{', "to open an object");
    skip_ws();
    if (consume('}')) return v;
    std::set<std::string> seen;  // a set, not a scan of keys: a 100 MB header must not take quadratic time
    for (;;) {
      skip_ws();
      if (pos_ >= n_ || p_[pos_] != '"') fail("expected a string key in an object");
      std::string key = parse_string();
      if (!seen.insert(key).second) fail("duplicate key \"" + key + "\"");
      skip_ws();
      expect(':', "after an object key");
      skip_ws();
      v.values.push_back(parse_value(depth + 1));
      v.keys.push_back(std::move(key));
      skip_ws();
      if (consume('}')) return v;
      expect(',', "or '}' in an object");
    }
  }

  Json parse_array(int depth) {
    Json v;
    v.kind = Json::Kind::Array;
    expect('[', "to open an array");
    skip_ws();
    if (consume(']')) return v;
    for (;;) {
      skip_ws();
      v.values.push_back(parse_value(depth + 1));
      skip_ws();
      if (consume(']')) return v;
      expect(',', "or ']' in an array");
    }
  }

  unsigned hex4() {
    if (n_ - pos_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = p_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= unsigned(c - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  // Copies one well-formed UTF-8 sequence starting at pos_ (first byte >= 0x80) into out.
  void copy_utf8(std::string& out) {
    auto byte = [&](std::size_t i) { return static_cast<unsigned char>(p_[i]); };
    unsigned char b0 = byte(pos_);
    int len;
    unsigned cp, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
    else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
    else fail("invalid UTF-8 in a string");
    if (n_ - pos_ < std::size_t(len)) fail("truncated UTF-8 sequence in a string");
    for (int i = 1; i < len; ++i) {
      unsigned char b = byte(pos_ + i);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in a string");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in a string");
    out.append(p_ + pos_, std::size_t(len));
    pos_ += std::size_t(len);
  }

  std::string parse_string() {
    expect('"', "to open a string");
    std::string out;
    for (;;) {
      if (pos_ >= n_) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(p_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in a string");
      if (c >= 0x80) {
        copy_utf8(out);
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos_ >= n_) fail("unterminated escape");
      char e = p_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!(consume('\\') && consume('u'))) fail("high surrogate not followed by a low one");
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape \\") + describe(e));
      }
    }
  }

  Json parse_integer() {
    bool negative = consume('-');
    if (pos_ >= n_ || p_[pos_] < '0' || p_[pos_] > '9') fail("expected a digit");
    if (p_[pos_] == '0' && pos_ + 1 < n_ && p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '9')
      fail("leading zero in a number");
    uint64_t v = 0;
    const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    while (pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9') {
      unsigned d = unsigned(p_[pos_] - '0');
      if (v > (limit - d) / 10) fail("integer out of range");
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ < n_ && (p_[pos_] == '.' || p_[pos_] == 'e' || p_[pos_] == 'E'))
      fail("numbers in a safetensors header must be integers");
    Json j;
    j.kind = Json::Kind::Integer;
    j.num = negative ? int64_t(0 - v) : int64_t(v);  // 0 - v wraps to the right value for INT64_MIN
    return j;
  }

  const char* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  const std::string& file_;
};

// ---------------------------------------------------------------------------------------------------------

void json_escape(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF): JSON text
// must be, so the writer refuses what the reader would.
bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned char b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    int len;
    unsigned cp, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
    else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
    else return false;
    if (s.size() - i < std::size_t(len)) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += std::size_t(len);
  }
  return true;
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
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      check(valid_utf8(k) && valid_utf8(v), what + ": metadata \"" + k + "\" is not valid UTF-8");
      if (!first) header += ',';
      first = false;
      json_escape(header, k);
      header += ':';
      json_escape(header, v);
    }
    header += '}';
  }
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
    if (header.size() > 1) header += ',';
    json_escape(header, t.name);
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  header += '}';
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

  Json root = JsonParser(reinterpret_cast<const char*>(data + 8), std::size_t(h), name).parse_document();
  check(root.kind == Json::Kind::Object, name + ": the JSON header is " + kind_name(root.kind) + ", not an object");

  SafetensorsFile file;
  struct Span {
    uint64_t begin, end;
    std::size_t index;
  };
  std::vector<Span> spans;
  for (std::size_t i = 0; i < root.keys.size(); ++i) {
    const std::string& key = root.keys[i];
    const Json& v = root.values[i];
    if (key == "__metadata__") {
      check(v.kind == Json::Kind::Object, name + ": __metadata__ is " + kind_name(v.kind) + ", not an object");
      for (std::size_t j = 0; j < v.keys.size(); ++j) {
        check(v.values[j].kind == Json::Kind::String, name + ": __metadata__ value of \"" + v.keys[j] + "\" is " +
                                                         kind_name(v.values[j].kind) + ", not a string");
        file.metadata[v.keys[j]] = v.values[j].str;
      }
      continue;
    }
    const std::string where = name + ": tensor '" + key + "'";
    check(!key.empty(), name + ": a tensor has an empty name");
    check(v.kind == Json::Kind::Object, where + " is described by " + kind_name(v.kind) + ", not an object");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (std::size_t j = 0; j < v.keys.size(); ++j) {
      if (v.keys[j] == "dtype") dtype = &v.values[j];
      else if (v.keys[j] == "shape") shape = &v.values[j];
      else if (v.keys[j] == "data_offsets") offsets = &v.values[j];
      else throw Error(where + " has an unknown field \"" + v.keys[j] + "\"");
    }
    check(dtype && shape && offsets, where + " lacks " +
                                         (!dtype ? "dtype" : !shape ? "shape" : "data_offsets"));
    SafetensorsTensor t;
    t.name = key;
    check(dtype->kind == Json::Kind::String, where + ": dtype is " + kind_name(dtype->kind) + ", not a string");
    check(parse_safetensors_dtype(dtype->str, &t.dtype),
          where + ": unsupported dtype \"" + dtype->str + "\" (known: F32 F64 BF16 F16 U8 I32 I64)");
    check(shape->kind == Json::Kind::Array, where + ": shape is " + kind_name(shape->kind) + ", not an array");
    for (const Json& d : shape->values) {
      check(d.kind == Json::Kind::Integer, where + ": shape holds " + kind_name(d.kind) + ", not an integer");
      check(d.num >= 0, where + ": negative dimension " + std::to_string(d.num) + " in its shape");
      t.shape.push_back(d.num);
    }
    uint64_t nbytes = 0;
    check(tensor_nbytes(t.shape, t.dtype, &nbytes),
          where + ": shape " + shape_str(t.shape) + " overflows 64-bit sizes");
    check(offsets->kind == Json::Kind::Array && offsets->values.size() == 2 &&
              offsets->values[0].kind == Json::Kind::Integer && offsets->values[1].kind == Json::Kind::Integer,
          where + ": data_offsets must be an array of two integers");
    const int64_t b = offsets->values[0].num, e = offsets->values[1].num;
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
