// safetensors reader/writer: bit-exact round trips, the exact byte layout, and every kind of corrupt file
// (each must throw one Error naming the file, never crash).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"
#include "ringtrain/train/safetensors.h"

using namespace ringtrain;
using namespace ringtrain::train;

namespace {

std::string temp_dir() {
  static std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("ringtrain_safetensors_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  static const struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup;
  return dir;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// A file with the given header text and `data_bytes` bytes of data.
std::string make_file(const std::string& header, std::size_t data_bytes, uint64_t declared_len = UINT64_MAX) {
  uint64_t h = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::string out(8, '\0');
  std::memcpy(out.data(), &h, 8);
  return out + header + std::string(data_bytes, '\x2a');
}

// Parses bytes saved as a file and expects an Error whose message names the file and contains `what`.
void expect_error(const std::string& bytes, const std::string& what) {
  std::string path = temp_dir() + "/bad.safetensors";
  write_bytes(path, bytes);
  try {
    read_safetensors(path);
    FAIL() << "no error; expected one containing '" << what << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected to contain: " << what;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

SafetensorsTensor random_tensor(const std::string& name, DType dtype, Shape shape, Rng& rng) {
  SafetensorsTensor t{name, dtype, shape, {}};
  t.bytes.resize(std::size_t(shape_numel(shape)) * dtype_size(dtype));
  for (auto& b : t.bytes) b = uint8_t(rng.next_u32());
  return t;
}

}  // namespace

TEST(Safetensors, RoundTripIsBitExact) {
  Rng rng(7);
  std::vector<SafetensorsTensor> tensors = {
      random_tensor("conv1.weight", DType::F32, {6, 1, 5, 5}, rng),
      random_tensor("b", DType::BF16, {3, 7}, rng),
      random_tensor("half", DType::F16, {5}, rng),
      random_tensor("d", DType::F64, {2, 2, 2}, rng),
      random_tensor("u", DType::U8, {13}, rng),
      random_tensor("i", DType::I32, {1, 3}, rng),
      random_tensor("l", DType::I64, {2}, rng),
      random_tensor("scalar", DType::F32, {}, rng),
      random_tensor("empty", DType::F32, {0, 4}, rng),
      random_tensor("name with \"quotes\", \\ and \xc3\xa9\t", DType::U8, {1}, rng),
  };
  std::map<std::string, std::string> meta = {{"model", "lenet5"}, {"note", "line\nbreak \"q\" \x01"}};
  std::string path = temp_dir() + "/round.safetensors";
  write_safetensors(path, tensors, meta);
  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& t : tensors) {
    const SafetensorsTensor* r = f.find(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(r->dtype, t.dtype) << t.name;
    EXPECT_EQ(r->shape, t.shape) << t.name;
    EXPECT_EQ(r->bytes, t.bytes) << t.name;
  }
  // Writing again what was read gives the same bytes.
  EXPECT_EQ(serialize_safetensors(f.tensors, f.metadata), serialize_safetensors(tensors, meta));
  // No temporary file is left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(temp_dir()))
    files += e.path().filename().string().find(".tmp.") != std::string::npos;
  EXPECT_EQ(files, 0);
}

TEST(Safetensors, ExactLayoutMatchesTheSpecification) {
  SafetensorsTensor t{"w", DType::F32, {2}, {}};
  float v[2] = {1.0f, -2.5f};
  t.bytes.resize(8);
  std::memcpy(t.bytes.data(), v, 8);
  std::vector<uint8_t> bytes = serialize_safetensors({t}, {{"k", "v"}});
  uint64_t h;
  std::memcpy(&h, bytes.data(), 8);
  std::string header(reinterpret_cast<const char*>(bytes.data() + 8), h);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})");
  EXPECT_EQ((8 + h) % 8, 0u);  // data 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + h + 8);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + h, v, 8), 0);
}

TEST(Safetensors, ReadsHandWrittenHeadersWithWhitespaceAndEscapes) {
  std::string header =
      " { \"__metadata__\" : { \"a\\u00e9\\ud83d\\ude00\" : \"x\\/y\\n\" } ,\n"
      "  \"t\" : { \"shape\" : [ 1 , 2 ] , \"data_offsets\" : [ 0 , 2 ], \"dtype\" : \"U8\" } }  ";
  std::string path = temp_dir() + "/hand.safetensors";
  write_bytes(path, make_file(header, 2));
  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].shape, (Shape{1, 2}));
  EXPECT_EQ(f.metadata.at("a\xc3\xa9\xf0\x9f\x98\x80"), "x/y\n");
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  std::string path = temp_dir() + "/w.safetensors";
  SafetensorsTensor t{"a", DType::F32, {2, 3}, std::vector<uint8_t>(20)};
  EXPECT_THROW(write_safetensors(path, {t}), Error);
  t.bytes.resize(24);
  EXPECT_THROW(write_safetensors(path, {t, t}), Error);  // duplicate name
  t.name = "__metadata__";
  EXPECT_THROW(write_safetensors(path, {t}), Error);
  t.name = "a";
  t.shape = {-2, -3};
  EXPECT_THROW(write_safetensors(path, {t}), Error);
  EXPECT_THROW(write_safetensors(temp_dir() + "/no/such/dir/x.safetensors", {}), Error);
  t.shape = {2, 3};
  t.name = "bad\xff";  // JSON text is UTF-8: the writer refuses what the reader would
  EXPECT_THROW(write_safetensors(path, {t}), Error);
  t.name = "a";
  EXPECT_THROW(write_safetensors(path, {t}, {{"k", "\xed\xa0\x80"}}), Error);
  write_safetensors(path, {t}, {{"k", "\xf0\x9f\x98\x80"}});  // valid 4-byte UTF-8 is fine
}

TEST(Safetensors, MissingFileAndDirectoryAreErrors) {
  EXPECT_THROW(read_safetensors(temp_dir() + "/does_not_exist.safetensors"), Error);
  EXPECT_THROW(read_safetensors(temp_dir()), Error);
}

TEST(Safetensors, CorruptTruncatedHeader) {
  expect_error("", "truncated");
  expect_error(std::string("\x10\0\0", 3), "truncated");
  std::string good = make_file(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2);
  expect_error(good.substr(0, 20), "runs past the end of the file");
  expect_error(good.substr(0, good.size() - 1), "run past the");  // data cut short
}

TEST(Safetensors, CorruptHeaderLength) {
  expect_error(make_file("{}", 0, 1ull << 62), "exceeds the 100 MB limit");
  expect_error(make_file("{}", 0, UINT64_MAX - 1), "exceeds");
  expect_error(make_file("{}", 0, 3), "runs past the end");
  expect_error(make_file("{}", 0, 0), "too small");
  expect_error(make_file("{} ", 0, 1), "too small");
}

// The syntax errors are nlohmann-json's own words; the rest are the safetensors subset's.
TEST(Safetensors, CorruptJson) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"a\":", "unexpected end of input"},
      {"{   ", "parsing object key - unexpected end of input; expected string literal"},
      {"{\"a\"", "expected ':'"},
      {"{\"a\":}", "unexpected '}'"},
      {"{\"a\":{},}", "expected string literal"},
      {"{\"a\" {}}", "expected ':'"},
      {"{} x", "invalid literal; expected end of input"},
      {"{}{}", "expected end of input"},
      {"[]", "not an object"},
      {"\"s\"", "not an object"},
      {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", "must be integers"},
      {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1e3],\"data_offsets\":[0,1]}}", "must be integers"},
      {"{\"t\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}", "unexpected number literal"},
      {"{\"t\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,1]}}", "out of range"},
      {"{\"t\":null}", "true, false and null"},
      {"{\"t\":\"abc}", "missing closing quote"},
      {"{\"t\":\"a\\qb\"}", "forbidden character after backslash"},
      {"{\"t\":\"\\u12\"}", "'\\u' must be followed by 4 hex digits"},
      {"{\"t\":\"\\udc00\"}", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"},
      {"{\"t\":\"\\ud800x\"}", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"{\"t\":\"a\tb\"}", "control character"},
      {"{\"t\":\"\xff\"}", "ill-formed UTF-8 byte"},
      {"{\"t\":\"\xc0\x80\"}", "ill-formed UTF-8 byte"},
      {"{\"t\":\"\xed\xa0\x80\"}", "ill-formed UTF-8 byte"},
      {"{\"a\":1,\"a\":2}", "duplicate key"},
      {"{\"t\":-}", "expected digit after '-'"},
  };
  for (const auto& [header, what] : cases) {
    SCOPED_TRACE(header);
    expect_error(make_file(header, 0), what);
  }
  std::string deep = "{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  expect_error(make_file(deep, 0), "nested deeper");
}

TEST(Safetensors, CorruptTensorEntries) {
  auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return "{\"t\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}}";
  };
  expect_error(make_file(entry("\"F33\"", "[2]", "[0,8]"), 8), "unsupported dtype \"F33\"");
  expect_error(make_file(entry("4", "[2]", "[0,8]"), 8), "dtype is an integer");
  expect_error(make_file(entry("\"F32\"", "2", "[0,8]"), 8), "shape is an integer");
  expect_error(make_file(entry("\"F32\"", "[\"2\"]", "[0,8]"), 8), "shape holds a string");
  expect_error(make_file(entry("\"F32\"", "[-2]", "[0,8]"), 8), "negative dimension");
  expect_error(make_file(entry("\"F32\"", "[4294967296,4294967296]", "[0,8]"), 8), "overflows");
  expect_error(make_file(entry("\"F32\"", "[2]", "[0]"), 8), "two integers");
  expect_error(make_file(entry("\"F32\"", "[2]", "[0,8,9]"), 8), "two integers");
  expect_error(make_file(entry("\"F32\"", "[2]", "[8,0]"), 8), "bad data_offsets");
  expect_error(make_file(entry("\"F32\"", "[2]", "[-8,0]"), 8), "bad data_offsets");
  expect_error(make_file(entry("\"F32\"", "[2]", "[0,16]"), 8), "run past the 8-byte data buffer");
  expect_error(make_file(entry("\"F32\"", "[2]", "[0,6]"), 8), "hold 6 bytes but F32 [2] needs 8");  // wrong size
  expect_error(make_file(entry("\"F64\"", "[2]", "[0,8]"), 8), "needs 16");  // wrong dtype size
  expect_error(make_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8), "lacks data_offsets");
  expect_error(make_file("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8), "lacks shape");
  expect_error(make_file("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "lacks dtype");
  expect_error(make_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8),
               "unknown field \"x\"");
  expect_error(make_file("{\"t\":[1]}", 0), "not an object");
  expect_error(make_file("{\"__metadata__\":[]}", 0), "__metadata__ is an array");
  expect_error(make_file("{\"__metadata__\":{\"k\":1}}", 0), "not a string");
}

TEST(Safetensors, CorruptOffsetsOverlapGapOrTrailingBytes) {
  const std::string a = "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":";
  const std::string b = "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":";
  expect_error(make_file("{" + a + "[0,4]}," + b + "[2,6]}}", 6), "overlaps tensor 'a'");
  expect_error(make_file("{" + a + "[0,4]}," + b + "[0,4]}}", 4), "overlaps");
  expect_error(make_file("{" + a + "[0,4]}," + b + "[6,10]}}", 10), "2 unused bytes before tensor 'b'");
  expect_error(make_file("{" + a + "[0,4]}}", 5), "1 bytes after the last tensor");
  expect_error(make_file("{}", 3), "3 bytes after the last tensor");
  // Order in the header does not matter, only the tiling.
  std::string path = temp_dir() + "/order.safetensors";
  write_bytes(path, make_file("{" + b + "[4,8]}," + a + "[0,4]}}", 8));
  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");
}

// Every prefix and many single-byte corruptions of a valid file either parse or throw Error.
TEST(Safetensors, SurvivesTruncationAndByteFlips) {
  Rng rng(3);
  std::vector<uint8_t> good =
      serialize_safetensors({random_tensor("x", DType::F32, {3, 2}, rng), random_tensor("y", DType::I64, {2}, rng)},
                            {{"m", "n"}});
  int errors = 0, parsed = 0;
  for (std::size_t n = 0; n <= good.size(); ++n) {
    try {
      parse_safetensors(good.data(), n, "prefix");
      ++parsed;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_EQ(parsed, 1);  // only the whole file
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> bad = good;
    int flips = 1 + int(rng.below(3));
    for (int i = 0; i < flips; ++i) bad[rng.below(uint32_t(bad.size()))] = uint8_t(rng.next_u32());
    try {
      parse_safetensors(bad.data(), bad.size(), "flipped");
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("flipped: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(errors, 0);
}

// Headers assembled at random from the tokens a header is made of: deep, odd and contradictory structures
// that byte flips rarely reach. Each must parse or throw Error naming the file.
TEST(Safetensors, SurvivesRandomHeadersFromJsonTokens) {
  const char* tokens[] = {"{", "}", "[", "]", ":", ",", "\"dtype\"", "\"shape\"", "\"data_offsets\"",
                          "\"__metadata__\"", "\"F32\"", "\"U8\"", "\"BF16\"", "\"t\"", "\"u\"", "0", "1", "4",
                          "8", "-1", "18446744073709551615", "9223372036854775807", "4294967296", "\"\\u0000\"",
                          "\"\\ud800\"", " ", "\"x", "1.5", "true"};
  Rng rng(123);
  int parsed = 0;
  for (int trial = 0; trial < 30000; ++trial) {
    std::string header;
    if (trial % 2) header = "{\"t\":{\"dtype\":\"U8\",\"shape\":[";  // bias half the cases towards valid prefixes
    int n = 1 + int(rng.below(24));
    for (int i = 0; i < n; ++i) header += tokens[rng.below(sizeof tokens / sizeof tokens[0])];
    std::string file = make_file(header, rng.below(16));
    try {
      parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "soup");
      ++parsed;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("soup: ", 0), 0u) << e.what();
    }
  }
  std::printf("  %d of 30000 random headers parsed, the rest were clean errors\n", parsed);
}
