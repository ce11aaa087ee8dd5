// BatchLoader: worker threads that prepare batches ahead of the training step. For each step they
// gather the samples of the step's indices, scale the pixels to [0,1] floats and copy the labels into
// one of `prefetch` reusable, page-locked (mlock'd) slots; the step takes ready batches in order, so
// the order of samples is exactly the order of the indices given, whatever the number of workers.
// The time the step spends waiting for a batch is measured (data-wait fraction).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "ringtrain/core/aligned.h"
#include "ringtrain/data/dataset.h"

namespace ringtrain::data {

// Scales uint8 pixels to [0,1] floats (value / 255), as DESIGN.md fixes the input convention; the
// loader and evaluation both go through it.
constexpr float kPixelScale = 1.0f / 255.0f;
inline void normalize_pixels(float* out, const uint8_t* pixels, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = float(pixels[i]) * kPixelScale;
}

struct Batch {
  const float* x = nullptr;          // N x rows x cols, pixels / 255
  const uint8_t* labels = nullptr;   // N
  const int64_t* indices = nullptr;  // N sample indices (for tests and diagnostics)
  int N = 0;
};

// On-the-fly augmentation: each training sample moved by a random whole-pixel shift in
// [-max_shift, max_shift] on each axis (zero fill). The shift is a function of (seed, epoch, sample
// index) only, so it does not depend on the number of workers, ranks or where a run was resumed.
struct Augment {
  int max_shift = 0;  // 0: off
  uint64_t seed = 0;
};

class BatchLoader {
 public:
  // workers == 0: batches are prepared on the calling thread when asked for (no prefetch).
  BatchLoader(const Split& split, int batch_size, int workers = 1, int prefetch = 4, Augment augment = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts an epoch over `indices` (this rank's samples, in order); batches are consecutive runs of
  // batch_size indices, the last one possibly shorter. Any batches of the previous epoch are dropped.
  // `epoch` only seeds the augmentation.
  void start_epoch(std::vector<int64_t> indices, int64_t first_batch = 0, int64_t epoch = 0);
  // The next batch of the epoch, or a batch with N == 0 at its end. The batch stays valid until the
  // next call to next() or start_epoch().
  Batch next();
  int64_t batches_in_epoch() const;

  double wait_seconds() const { return wait_seconds_; }  // time next() spent waiting, all epochs
  void reset_wait() { wait_seconds_ = 0.0; }
  bool pinned() const { return pinned_; }                // whether mlock succeeded for every slot

 private:
  struct Slot {
    AlignedBuffer<float> x;
    AlignedBuffer<uint8_t> labels;
    AlignedBuffer<int64_t> indices;
    int N = 0;
    int64_t batch = -1;  // which batch of the epoch the slot holds (valid when ready)
    bool ready = false;
  };
  void fill(Slot& slot, int64_t batch);
  void worker_loop();
  void stop_workers();

  const Split& split_;
  const int batch_size_;
  const int64_t pixels_;
  const Augment augment_;
  int64_t epoch_ = 0;
  std::vector<int64_t> indices_;
  std::vector<Slot> slots_;
  int64_t first_batch_ = 0;
  int64_t next_to_fill_ = 0;   // next batch a worker should prepare
  int64_t next_to_take_ = 0;   // next batch the step takes
  int busy_ = 0;               // workers filling a slot right now
  bool paused_ = false;        // start_epoch is swapping the indices: workers claim nothing
  bool stopping_ = false;
  bool pinned_ = true;
  double wait_seconds_ = 0.0;
  std::mutex mutex_;
  std::condition_variable work_cv_, ready_cv_, idle_cv_;
  std::vector<std::thread> workers_;
};

}  // namespace ringtrain::data
