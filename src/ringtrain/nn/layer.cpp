#include "ringtrain/nn/layer.h"

#include "ringtrain/core/error.h"

namespace ringtrain::nn {

void Layer::forward_slice(const ops::KernelTable&, ParameterSet&, const float*, float*, const Slice&) {
  throw Error(name_ + ": this layer cannot run on slices of a batch (--threads)");
}

void Layer::backward_slice(const ops::KernelTable&, ParameterSet&, const float*, const float*, const float*, float*,
                           const Slice&) {
  throw Error(name_ + ": this layer cannot run on slices of a batch (--threads)");
}

}  // namespace ringtrain::nn
