#include "ringtrain/data/loader.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>

#include "ringtrain/core/error.h"
#include "ringtrain/core/rng.h"

namespace ringtrain::data {

namespace {
bool lock_pages(const void* p, std::size_t bytes) { return bytes == 0 || ::mlock(p, bytes) == 0; }
void unlock_pages(const void* p, std::size_t bytes) {
  if (bytes) ::munlock(p, bytes);
}
}  // namespace

BatchLoader::BatchLoader(const Split& split, int batch_size, int workers, int prefetch, Augment augment)
    : split_(split), batch_size_(batch_size), pixels_(int64_t(split.rows) * split.cols), augment_(augment) {
  check(augment.max_shift >= 0 && augment.max_shift < std::min(split.rows, split.cols),
        "--augment-shift must be between 0 and the image size");
  check(batch_size > 0, "loader: batch size must be positive");
  check(workers >= 0 && workers <= 64, "--workers must be between 0 and 64, got " + std::to_string(workers));
  check(prefetch >= 1 && prefetch <= 1024, "--prefetch must be between 1 and 1024, got " + std::to_string(prefetch));
  // One slot is held by the step (the batch it is working on) while the others are being filled.
  slots_.resize(workers == 0 ? 1 : std::max(prefetch, workers) + 1);
  for (Slot& s : slots_) {
    s.x.resize(std::size_t(batch_size) * pixels_);
    s.labels.resize(std::size_t(batch_size));
    s.indices.resize(std::size_t(batch_size));
    // Page-locked so a batch never waits on a page fault; a failure (e.g. RLIMIT_MEMLOCK) is reported
    // through pinned() and otherwise harmless.
    pinned_ = lock_pages(s.x.data(), s.x.size() * sizeof(float)) && pinned_;
    pinned_ = lock_pages(s.labels.data(), s.labels.size()) && pinned_;
  }
  for (int w = 0; w < workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

BatchLoader::~BatchLoader() {
  stop_workers();
  for (Slot& s : slots_) {
    unlock_pages(s.x.data(), s.x.size() * sizeof(float));
    unlock_pages(s.labels.data(), s.labels.size());
  }
}

void BatchLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

int64_t BatchLoader::batches_in_epoch() const {
  return (int64_t(indices_.size()) + batch_size_ - 1) / batch_size_;
}

void BatchLoader::start_epoch(std::vector<int64_t> indices, int64_t first_batch, int64_t epoch) {
  for (int64_t i : indices)
    check(i >= 0 && i < split_.count, "loader: sample index " + std::to_string(i) + " is outside the split");
  std::unique_lock<std::mutex> lock(mutex_);
  // No worker may be filling a slot while the indices change: stop new claims, wait for the busy ones.
  paused_ = true;
  idle_cv_.wait(lock, [&] { return busy_ == 0; });
  paused_ = false;
  indices_ = std::move(indices);
  epoch_ = epoch;
  first_batch_ = first_batch;
  next_to_fill_ = first_batch;
  next_to_take_ = first_batch;
  for (Slot& s : slots_) s.ready = false, s.batch = -1;
  lock.unlock();
  work_cv_.notify_all();
}

void BatchLoader::fill(Slot& slot, int64_t batch) {
  const int64_t begin = batch * batch_size_;
  const int N = int(std::min<int64_t>(batch_size_, int64_t(indices_.size()) - begin));
  for (int n = 0; n < N; ++n) {
    const int64_t index = indices_[begin + n];
    const uint8_t* px = split_.image(index);
    float* dst = slot.x.data() + int64_t(n) * pixels_;
    if (augment_.max_shift == 0) {
      normalize_pixels(dst, px, pixels_);
    } else {
      Rng rng(mix64(augment_.seed ^ mix64(uint64_t(epoch_) * 0x100000000ULL + uint64_t(index))));
      const int span = 2 * augment_.max_shift + 1;
      const int dy = int(rng.below(span)) - augment_.max_shift, dx = int(rng.below(span)) - augment_.max_shift;
      // Row by row: out[y][x] = in[y - dy][x - dx] inside the image, 0 outside; the copied part of a row is
      // one normalize_pixels run, so a shift costs about what plain normalisation does.
      const int rows = split_.rows, cols = split_.cols;
      const int x0 = std::max(0, dx), x1 = std::min(cols, cols + dx);  // columns with a source pixel
      for (int y = 0; y < rows; ++y) {
        float* out = dst + int64_t(y) * cols;
        const int sy = y - dy;
        if (sy < 0 || sy >= rows || x0 >= x1) {
          std::fill(out, out + cols, 0.0f);
          continue;
        }
        std::fill(out, out + x0, 0.0f);
        normalize_pixels(out + x0, px + int64_t(sy) * cols + (x0 - dx), x1 - x0);
        std::fill(out + x1, out + cols, 0.0f);
      }
    }
    slot.labels[n] = split_.labels[index];
    slot.indices[n] = index;
  }
  slot.N = N;
}

void BatchLoader::worker_loop() {
  // A worker owns batch number b from the moment it claims it and fills slot b % slots in place. That
  // slot is free: the step holds only batch next_to_take_ - 1, and b < next_to_take_ - 1 + slots.
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stopping_ || (!paused_ && next_to_fill_ < batches_in_epoch() &&
                           next_to_fill_ < next_to_take_ - 1 + int64_t(slots_.size()));
    });
    if (stopping_) return;
    const int64_t batch = next_to_fill_++;
    Slot& slot = slots_[batch % slots_.size()];
    ++busy_;
    lock.unlock();
    fill(slot, batch);
    lock.lock();
    if (--busy_ == 0) idle_cv_.notify_all();
    slot.batch = batch;
    slot.ready = true;
    ready_cv_.notify_all();
  }
}

Batch BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_to_take_ >= batches_in_epoch()) return {};
  const int64_t batch = next_to_take_;
  Slot& slot = slots_[batch % slots_.size()];
  if (workers_.empty()) {
    fill(slot, batch);
  } else {
    const auto start = std::chrono::steady_clock::now();
    ready_cv_.wait(lock, [&] { return slot.ready && slot.batch == batch; });
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slot.ready = false;
  }
  ++next_to_take_;  // the previous batch's slot is free again
  lock.unlock();
  work_cv_.notify_all();
  return {slot.x.data(), slot.labels.data(), slot.indices.data(), slot.N};
}

}  // namespace ringtrain::data
