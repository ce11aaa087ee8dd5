// The periodic checkpoint directory: numbered files, the newest K kept, fallback past a corrupt
// newest file, and a failed write (file size limit standing in for a full disk) that keeps the
// previous checkpoint intact.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "ringtrain/core/error.h"
#include "ringtrain/nn/models/lenet5.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_dir.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("ringtrain_ckdir_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir.string();
}

TEST(CheckpointDir, KeepsTheNewestKInStepOrder) {
  CheckpointDir d(fresh_dir("keep"), 2);
  auto model = nn::make_lenet5();
  model->init_parameters(1);
  for (int64_t step : {5, 100, 20, 1000}) save_checkpoint(d.path_for(step), *model, nullptr);
  auto files = d.list();
  ASSERT_EQ(files.size(), 4u);
  EXPECT_NE(files[0].find("step-00000005"), std::string::npos);
  EXPECT_NE(files[3].find("step-00001000"), std::string::npos);
  d.prune();
  files = d.list();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[0].find("step-00000100"), std::string::npos);
  EXPECT_NE(files[1].find("step-00001000"), std::string::npos);
}

TEST(CheckpointDir, FallsBackPastACorruptNewestFile) {
  CheckpointDir d(fresh_dir("corrupt"), 3);
  auto model = nn::make_lenet5();
  model->init_parameters(2);
  save_checkpoint(d.path_for(10), *model, nullptr);
  save_checkpoint(d.path_for(20), *model, nullptr);
  fs::resize_file(d.path_for(20), fs::file_size(d.path_for(20)) / 2);  // truncated, as by a crash
  std::vector<std::string> warnings;
  auto check_loads = [&](const std::string& path) {
    auto m = nn::make_lenet5();
    load_weights(path, *m);
  };
  std::string chosen = d.latest_valid(check_loads, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(chosen, d.path_for(10));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(d.path_for(20)), std::string::npos) << warnings[0];
  fs::resize_file(d.path_for(10), 7);
  EXPECT_EQ(d.latest_valid(check_loads, [](const std::string&) {}), "");
}

TEST(CheckpointDir, AFailedWriteKeepsThePreviousCheckpoint) {
  CheckpointDir d(fresh_dir("full"), 3);
  auto model = nn::make_lenet5();
  model->init_parameters(3);
  save_checkpoint(d.path_for(1), *model, nullptr);
  const auto size_before = fs::file_size(d.path_for(1));
  // A file size limit makes the next write fail like a full disk (EFBIG instead of ENOSPC).
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    save_checkpoint(d.path_for(1), *model, nullptr);  // overwrite attempt
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_NE(message.find(d.path_for(1)), std::string::npos) << "no error naming the file: '" << message << "'";
  EXPECT_EQ(fs::file_size(d.path_for(1)), size_before);
  auto m = nn::make_lenet5();
  EXPECT_NO_THROW(load_weights(d.path_for(1), *m));
  for (const auto& entry : fs::directory_iterator(d.dir()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "temporary left: " << entry.path();
}

TEST(CheckpointDir, RefusesAPathThatIsAFile) {
  std::string path = fresh_dir("file");
  std::ofstream(path) << "x";
  EXPECT_THROW(CheckpointDir(path, 2), Error);
  EXPECT_THROW(CheckpointDir(fresh_dir("k0"), 0), Error);
}

}  // namespace
}  // namespace ringtrain::train
