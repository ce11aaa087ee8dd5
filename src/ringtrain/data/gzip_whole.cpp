#include "ringtrain/data/gzip_whole.h"

#include <libdeflate.h>

#include <memory>

namespace ringtrain::data {

bool inflate_whole_gzip(const uint8_t* in, std::size_t in_size, uint8_t* out, std::size_t out_size) {
  std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> d(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (!d) return false;
  std::size_t in_used = 0, out_got = 0;
  const libdeflate_result r =
      libdeflate_gzip_decompress_ex(d.get(), in, in_size, out, out_size, &in_used, &out_got);
  return r == LIBDEFLATE_SUCCESS && in_used == in_size && out_got == out_size;
}

}  // namespace ringtrain::data
