// 64-byte aligned buffers: one cache line, one AVX-512 register.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace ringtrain {

constexpr std::size_t kAlignment = 64;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// Zero-initialised aligned allocation of `count` elements of T.
template <typename T>
std::unique_ptr<T[], AlignedFree> aligned_alloc_zeroed(std::size_t count) {
  std::size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0) bytes = kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

// A growable aligned array of T; contents are zero after resize().
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { resize(n); }
  void resize(std::size_t n) {
    data_ = aligned_alloc_zeroed<T>(n);
    size_ = n;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  void zero() { std::memset(data_.get(), 0, size_ * sizeof(T)); }
  // resize(n) unless already at least n long: for a buffer several users share, each reserving its own need.
  void grow(std::size_t n) {
    if (size_ < n) resize(n);
  }

 private:
  std::unique_ptr<T[], AlignedFree> data_;
  std::size_t size_ = 0;
};

}  // namespace ringtrain
