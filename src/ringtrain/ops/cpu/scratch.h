// Per-thread scratch memory for the fast kernels (blocked copies of activations, packed weights).
// It grows only when a larger request arrives, i.e. during the first step, so steady-state training
// steps allocate nothing (DESIGN.md: buffers come from an arena sized on the first step).
#pragma once
#include <cstddef>

namespace ringtrain::ops::cpu {

// At least `floats` floats, 64-byte aligned, owned by the calling thread; contents unspecified.
// Valid until the same thread asks again with a larger size.
float* thread_scratch(std::size_t floats);

}  // namespace ringtrain::ops::cpu
