// Per-thread partial weight gradients for layers whose batch is split across threads: slice 0 writes
// straight into the ParameterSet's gradient, slices 1..T-1 into their own buffers, and reduce() adds
// them in slice order, so the result depends on T but never on thread timing. reduce() may be split
// into parts (each a range of every tensor's elements, one a thread): each element is still summed in
// slice order, so the bits do not depend on the parts.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "ringtrain/core/aligned.h"

namespace ringtrain::nn {

class GradPartials {
 public:
  // sizes: floats of each gradient tensor the layer writes (e.g. weight, bias).
  void reserve(int threads, const std::vector<std::size_t>& sizes) {
    sizes_ = sizes;
    offsets_.clear();
    stride_ = 0;
    for (std::size_t n : sizes) {
      offsets_.push_back(stride_);
      stride_ += (n + 15) / 16 * 16;
    }
    threads_ = threads;
    buffer_.resize(threads > 1 ? std::size_t(threads - 1) * stride_ : 0);
  }
  // Where slice t writes gradient i (final: the ParameterSet's gradient for slice 0).
  float* slot(int t, int i, float* final_grad) {
    return t == 0 ? final_grad : buffer_.data() + std::size_t(t - 1) * stride_ + offsets_[i];
  }
  void zero_slot(int t, int i, float* final_grad) { std::memset(slot(t, i, final_grad), 0, sizes_[i] * sizeof(float)); }
  // final_grads[i] += sum over t = 1..T-1 of slot(t, i), in slice order; part `part` of `parts` (element
  // ranges cut at multiples of 16 floats, a cache line).
  void reduce(std::initializer_list<float*> final_grads, int part = 0, int parts = 1) {
    reduce_into(final_grads.begin(), part, parts);
  }
  void reduce(const std::vector<float*>& final_grads, int part = 0, int parts = 1) {
    reduce_into(final_grads.data(), part, parts);
  }

 private:
  void reduce_into(float* const* final_grads, int part, int parts) {
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      const std::size_t n = sizes_[i], lines = (n + 15) / 16;
      const std::size_t lo = std::min(n, lines * std::size_t(part) / std::size_t(parts) * 16),
                        hi = std::min(n, lines * std::size_t(part + 1) / std::size_t(parts) * 16);
      float* g = final_grads[i];
      for (int t = 1; t < threads_; ++t) {
        const float* src = buffer_.data() + std::size_t(t - 1) * stride_ + offsets_[i];
        for (std::size_t j = lo; j < hi; ++j) g[j] += src[j];
      }
    }
  }

  std::vector<std::size_t> sizes_, offsets_;
  std::size_t stride_ = 0;
  int threads_ = 1;
  AlignedBuffer<float> buffer_;
};

}  // namespace ringtrain::nn
