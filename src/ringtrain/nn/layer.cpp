#include "ringtrain/nn/layer.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

Shape Layer::configure_inputs(const std::vector<Shape>& in) {
  check(in.size() == 1, name_ + ": takes one input, got " + std::to_string(in.size()));
  return configure(in[0]);
}

void Layer::forward_inputs(const ops::KernelTable&, ParameterSet&, const float* const*, float*, const Slice&) {
  throw Error(name_ + ": has no multi-input forward");
}

void Layer::backward_inputs(const ops::KernelTable&, ParameterSet&, const float* const*, const float*, const float*,
                            float* const*, const Slice&) {
  throw Error(name_ + ": has no multi-input backward");
}

void Layer::forward_slice(const ops::KernelTable&, ParameterSet&, const float*, float*, const Slice&) {
  throw Error(name_ + ": this layer cannot run on slices of a batch (--threads)");
}

void Layer::backward_slice(const ops::KernelTable&, ParameterSet&, const float*, const float*, const float*, float*,
                           const Slice&) {
  throw Error(name_ + ": this layer cannot run on slices of a batch (--threads)");
}

void Layer::reserve_grad_slots(const ParameterSet& p) {
  std::vector<std::size_t> sizes;
  for (int i : param_indices_) sizes.push_back(p.views()[std::size_t(i)].numel);
  slots_.reserve(threads_, sizes);
}

void Layer::reduce_grads(ParameterSet& p, int part, int parts) {
  if (threads_ <= 1 || param_indices_.empty()) return;
  // Reused across calls (capacity kept): a fresh vector here would allocate on every step.
  thread_local std::vector<float*> finals;
  finals.clear();
  for (int i : param_indices_) finals.push_back(p.grad(i));
  slots_.reduce(finals, part, parts);
}

}  // namespace ringtrain::nn
