// libFuzzer target: the IDX parser (raw and gzip) must turn any byte sequence into either a valid
// array (data size = product of dims) or a ringtrain::Error; never a crash, hang or sanitizer report.
#include <cstdint>
#include <cstdlib>

#include "ringtrain/core/error.h"
#include "ringtrain/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ringtrain::data::IdxArray a = ringtrain::data::parse_idx(data, size, "fuzz.idx");
    uint64_t n = 1;
    for (int64_t d : a.dims) n *= uint64_t(d);
    if (a.dims.empty() || n != a.data.size()) std::abort();  // the parser's promise, checked
  } catch (const ringtrain::Error&) {
  }
  return 0;
}
