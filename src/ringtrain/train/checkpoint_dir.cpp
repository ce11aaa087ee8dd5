#include "ringtrain/train/checkpoint_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

namespace fs = std::filesystem;

namespace {
const std::regex kName(R"(step-(\d{8,})\.safetensors)");
}

CheckpointDir::CheckpointDir(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  check(keep >= 1, "--keep-checkpoints must be at least 1");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  check(!ec && fs::is_directory(dir_), dir_ + ": cannot create the checkpoint directory (" + ec.message() + ")");
  check(::access(dir_.c_str(), W_OK) == 0, dir_ + ": checkpoint directory is not writable");
}

std::string CheckpointDir::path_for(int64_t step) const {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld.safetensors", (long long)step);
  return (fs::path(dir_) / name).string();
}

std::vector<std::string> CheckpointDir::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, kName))
      found.emplace_back(std::stoll(m[1]), entry.path().string());
  }
  check(!ec, dir_ + ": cannot list the checkpoint directory (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

void CheckpointDir::prune() const {
  std::vector<std::string> files = list();
  for (std::size_t i = 0; i + std::size_t(keep_) < files.size(); ++i) {
    std::error_code ec;
    fs::remove(files[i], ec);  // best effort: a leftover old checkpoint is harmless
  }
}

std::string CheckpointDir::latest_valid(const std::function<void(const std::string&)>& valid,
                                        const std::function<void(const std::string&)>& warn) const {
  std::vector<std::string> files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      valid(*it);
      return *it;
    } catch (const Error& e) {
      warn("skipping checkpoint " + *it + ": " + e.what());
    }
  }
  return "";
}

}  // namespace ringtrain::train
