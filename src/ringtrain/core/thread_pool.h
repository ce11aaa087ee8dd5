// ThreadPool: a fixed set of threads inside one process (one rank) that run the same task on T
// slices of a batch (`--threads T`; nn::Model::set_threads). The calling thread is slice 0, so T
// threads means T-1 workers and no oversubscription: a rank with T threads uses exactly T cores.
// Workers spin briefly between tasks (a training step issues two: forward and backward) and then
// sleep on a condition variable.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ringtrain {

class ThreadPool {
 public:
  // threads >= 1; starts threads - 1 workers.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // Runs fn(t) for every t in [0, size()): t = 0 on the caller, the others on the workers; returns
  // when all have finished. Not reentrant; fn must not throw.
  template <class F>
  void run(F&& fn) {
    run_impl([](void* ctx, int t) { (*static_cast<std::remove_reference_t<F>*>(ctx))(t); }, &fn);
  }

 private:
  void run_impl(void (*call)(void*, int), void* ctx);
  void worker(int t);

  int size_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  void (*call_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
};

// How many cores this process may run on (its CPU affinity: 1 under mpirun --bind-to core with one
// core a rank); at least 1.
int cores_this_process_may_use();

// Runs fn(t) for t in [0, T) on pool (T = pool's size), or fn(0) on the caller when pool is null.
template <class F>
void parallel_run(ThreadPool* pool, F&& fn) {
  if (pool && pool->size() > 1)
    pool->run(fn);
  else
    fn(0);
}

// The t-th of `parts` contiguous slices of [0, n): every boundary but n is a multiple of `align`
// (so each slice is whole vector blocks of samples); trailing slices may be empty. Depends only on
// (n, parts, align), which makes reductions over slices deterministic for a given thread count.
inline std::pair<int, int> slice_of(int n, int parts, int t, int align) {
  const int per = ((n + parts - 1) / parts + align - 1) / align * align;
  const int lo = std::min(n, t * per), hi = std::min(n, lo + per);
  return {lo, hi};
}

}  // namespace ringtrain
