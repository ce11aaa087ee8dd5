// A directory of periodic checkpoints: step-numbered safetensors files ("step-00001200.safetensors"),
// each written atomically by save_checkpoint (temp file, fsync, rename, fsync of the directory), the
// newest `keep` kept. Resuming takes the newest file that reads back completely and carries the trainer
// state; a truncated or corrupt newest file is skipped with a message naming it, so a run killed while
// writing (or a damaged disk) falls back to the previous checkpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ringtrain::train {

class CheckpointDir {
 public:
  // Creates the directory if needed; throws Error naming it if that fails or it is not writable.
  CheckpointDir(std::string dir, int keep);

  const std::string& dir() const { return dir_; }
  std::string path_for(int64_t step) const;
  // Checkpoint files present, oldest first (by step number in the name).
  std::vector<std::string> list() const;
  // After a successful save: removes all but the newest `keep` files.
  void prune() const;
  // The newest checkpoint for which `valid(path)` returns without throwing; "" if there is none.
  // Each skipped file is reported through `warn` with the reason.
  std::string latest_valid(const std::function<void(const std::string&)>& valid,
                           const std::function<void(const std::string&)>& warn) const;

 private:
  std::string dir_;
  int keep_;
};

}  // namespace ringtrain::train
