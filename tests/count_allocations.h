// Counts heap allocations while armed: replaces the global operator new of the test binary that includes
// it (include it in one file of a binary only). Tests arm it around a training step to prove that a step
// allocates nothing (the arena's promise).
#pragma once
#include <atomic>
#include <cstdlib>
#include <new>

inline std::atomic<bool> g_count_allocs{false};
inline std::atomic<long> g_allocs{0};

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
