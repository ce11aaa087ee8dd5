#include "ringtrain/nn/tp_regions.h"

#include <cstring>

#include "ringtrain/nn/model.h"

namespace ringtrain::nn {

Shape CopyToTensorGroup::configure(const Shape& in) {
  features_ = shape_numel(in);
  return in;
}

void CopyToTensorGroup::forward(const ops::KernelTable&, ParameterSet&, const float* in, float* out, int N) {
  std::memcpy(out, in, std::size_t(N) * std::size_t(features_) * sizeof(float));
}

void CopyToTensorGroup::backward(const ops::KernelTable&, ParameterSet&, const float*, const float*,
                                 const float* dout, float* din, int N) {
  if (!din) return;
  const std::size_t n = std::size_t(N) * std::size_t(features_);
  std::memcpy(din, dout, n * sizeof(float));
  group_.allreduce_sum(din, n);
}

Shape ReduceFromTensorGroup::configure(const Shape& in) {
  features_ = shape_numel(in);
  return in;
}

void ReduceFromTensorGroup::forward(const ops::KernelTable&, ParameterSet&, const float* in, float* out, int N) {
  const std::size_t n = std::size_t(N) * std::size_t(features_);
  std::memcpy(out, in, n * sizeof(float));
  group_.allreduce_sum(out, n);
}

void ReduceFromTensorGroup::backward(const ops::KernelTable&, ParameterSet&, const float*, const float*,
                                     const float* dout, float* din, int N) {
  if (din) std::memcpy(din, dout, std::size_t(N) * std::size_t(features_) * sizeof(float));
}

int64_t tensor_parallel_floats_per_sample(const Model& model) {
  int64_t floats = 0;
  for (const auto& layer : model.layers()) {
    if (const auto* f = dynamic_cast<const CopyToTensorGroup*>(layer.get())) floats += f->allreduce_floats_per_sample();
    if (const auto* g = dynamic_cast<const ReduceFromTensorGroup*>(layer.get())) floats += g->allreduce_floats_per_sample();
    if (const auto* c = dynamic_cast<const ColumnParallelLinear*>(layer.get())) floats += c->allreduce_floats_per_sample();
    if (const auto* r = dynamic_cast<const RowParallelLinear*>(layer.get())) floats += r->allreduce_floats_per_sample();
  }
  return floats;
}

}  // namespace ringtrain::nn
