// Tensor: a shape, a dtype and 64-byte aligned owned storage. Kept deliberately small:
// kernels take raw pointers and sizes; Tensor is for ownership and for I/O (checkpoints).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/core/aligned.h"

namespace ringtrain {

enum class DType : uint8_t { F32, F64, BF16, F16, U8, I32, I64 };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return numel() * dtype_size(dtype_); }

  void* raw() { return storage_.data(); }
  const void* raw() const { return storage_.data(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(storage_.data()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(storage_.data()); }

 private:
  Shape shape_;
  DType dtype_ = DType::F32;
  AlignedBuffer<unsigned char> storage_;
};

}  // namespace ringtrain
