#include "ringtrain/ops/cpu/scratch.h"

#include "ringtrain/core/aligned.h"

namespace ringtrain::ops::cpu {

float* thread_scratch(std::size_t floats) {
  thread_local AlignedBuffer<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats + floats / 4);
  return buffer.data();
}

}  // namespace ringtrain::ops::cpu
