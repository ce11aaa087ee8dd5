// libFuzzer target: the safetensors parser (header length, JSON header, dtypes, shapes, offsets) must
// turn any byte sequence into either a consistent file or a ringtrain::Error.
#include <cstdint>
#include <cstdlib>

#include "ringtrain/core/error.h"
#include "ringtrain/train/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ringtrain::train::SafetensorsFile f = ringtrain::train::parse_safetensors(data, size, "fuzz.safetensors");
    for (const auto& t : f.tensors)
      if (t.bytes.size() != std::size_t(ringtrain::shape_numel(t.shape)) * ringtrain::dtype_size(t.dtype)) std::abort();
  } catch (const ringtrain::Error&) {
  }
  return 0;
}
