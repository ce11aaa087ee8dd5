// ByteArray: the pixels of a dataset split, either owned (a vector) or a read-only view of a
// memory-mapped file kept alive by a shared owner. Reading is the same either way; any mutation of a
// mapped array first copies it (a mapping is never written to).
#pragma once
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ringtrain::data {

class ByteArray {
 public:
  ByteArray() = default;
  ByteArray(std::vector<uint8_t> bytes) : owned_(std::move(bytes)) {}  // NOLINT: implicit by design
  static ByteArray view(const uint8_t* data, std::size_t size, std::shared_ptr<const void> keep_alive) {
    ByteArray a;
    a.view_ = data;
    a.view_size_ = size;
    a.keep_alive_ = std::move(keep_alive);
    return a;
  }

  bool is_view() const { return view_ != nullptr; }
  std::size_t size() const { return view_ ? view_size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  const uint8_t* data() const { return view_ ? view_ : owned_.data(); }
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + size(); }
  uint8_t operator[](std::size_t i) const { return data()[i]; }

  // Mutation (owned arrays; a view is copied first).
  uint8_t* data() { return own().data(); }
  uint8_t& operator[](std::size_t i) { return own()[i]; }
  void resize(std::size_t n) { own().resize(n); }
  void assign(std::size_t n, uint8_t value) { own().assign(n, value); }

  friend bool operator==(const ByteArray& a, const ByteArray& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  std::vector<uint8_t>& own() {
    if (view_) {
      owned_.assign(view_, view_ + view_size_);
      view_ = nullptr;
      view_size_ = 0;
      keep_alive_.reset();
    }
    return owned_;
  }
  std::vector<uint8_t> owned_;
  const uint8_t* view_ = nullptr;
  std::size_t view_size_ = 0;
  std::shared_ptr<const void> keep_alive_;
};

}  // namespace ringtrain::data
