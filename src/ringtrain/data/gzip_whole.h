// A whole gzip file in memory, decompressed at once with libdeflate (Debian's libdeflate-dev): about 4x
// zlib's streaming inflate on the IDX files here (Fashion-MNIST's 47 MB of training images: 0.08 s
// against 0.33 s, Zen 5), and the first thing every run does before its first step.
//
// Only the simple case takes this path: exactly one gzip member, no trailing bytes, and a decompressed size
// the caller already knows (data/idx.cpp: the IDX header, read through zlib, agreeing with the gzip
// trailer). Anything else - several members, a corrupt or truncated stream, a size that disagrees - returns
// false, and the caller decodes the file with the streaming reader (data/byte_source.h), whose errors say
// what is wrong.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ringtrain::data {

// Decompresses the gzip member in[0, in_size) into out[0, out_size). True when it decoded without error,
// used every input byte and produced exactly out_size bytes; otherwise false (out's contents unspecified).
bool inflate_whole_gzip(const uint8_t* in, std::size_t in_size, uint8_t* out, std::size_t out_size);

}  // namespace ringtrain::data
