#include "ringtrain/core/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include <thread>

#include "ringtrain/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RINGTRAIN_PAUSE() _mm_pause()
#else
#define RINGTRAIN_PAUSE() ((void)0)
#endif

namespace ringtrain {

int cores_this_process_may_use() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {
// About 50-100 us of spinning before a worker sleeps (or the caller blocks): longer than the gap
// between two ops of a step, much shorter than the gap between steps when the loader is slow.
constexpr int kSpins = 20000;
}  // namespace

ThreadPool::ThreadPool(int threads) : size_(threads) {
  check(threads >= 1 && threads <= 1024, "thread pool: thread count must be in [1, 1024], got " + std::to_string(threads));
  for (int t = 1; t < threads; ++t) threads_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& th : threads_) th.join();
}

void ThreadPool::run_impl(void (*call)(void*, int), void* ctx) {
  if (size_ == 1) {
    call(ctx, 0);
    return;
  }
  call_ = call;
  ctx_ = ctx;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  call(ctx, 0);
  for (int i = 0; i < kSpins; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    RINGTRAIN_PAUSE();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::worker(int t) {
  uint64_t seen = 0;
  for (;;) {
    bool ready = false;
    for (int i = 0; i < kSpins; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) {
        ready = true;
        break;
      }
      RINGTRAIN_PAUSE();
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    call_(ctx_, t);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace ringtrain
