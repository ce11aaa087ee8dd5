#include "ringtrain/nn/tp_reduction.h"

#include <cstring>

#include "ringtrain/core/aligned.h"
#include "ringtrain/core/error.h"

namespace ringtrain::nn {

namespace {
// (The message is built only on failure: the passes allocate nothing.)
void check_chunks(int chunks, int length, const char* what) {
  if (chunks >= 1 && length % chunks == 0) return;
  throw Error(std::string("tensor-parallel sum: ") + what + " of " + std::to_string(length) + " cannot be cut into " +
              std::to_string(chunks) + " equal chunks");
}

// out = the pairwise tree of parts[0..chunks) (each n floats; ((p0 + p1) + (p2 + p3)) for 4, ((p0 + p1) +
// p2) for 3), + bias (O floats a row, null: none) after it: one pass for 2 and 4 chunks, the usual cases.
void tree_sum(float* out, float* parts, int chunks, std::size_t n, const float* bias, int O) {
  const std::size_t rows = n / std::size_t(O);
  if (chunks == 4 || chunks == 2) {
    const float *p0 = parts, *p1 = parts + n;
    const float *p2 = chunks == 4 ? parts + 2 * n : nullptr, *p3 = chunks == 4 ? parts + 3 * n : nullptr;
    for (std::size_t r = 0; r < rows; ++r)
      for (int o = 0; o < O; ++o) {
        const std::size_t i = r * std::size_t(O) + o;
        const float t = chunks == 4 ? (p0[i] + p1[i]) + (p2[i] + p3[i]) : p0[i] + p1[i];
        out[i] = bias ? t + bias[o] : t;
      }
    return;
  }
  for (int stride = 1; stride < chunks; stride *= 2)
    for (int c = 0; c + stride < chunks; c += 2 * stride) {
      float* a = parts + std::size_t(c) * n;
      const float* b = parts + std::size_t(c + stride) * n;
      for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
    }
  for (std::size_t r = 0; r < rows; ++r)
    for (int o = 0; o < O; ++o) {
      const std::size_t i = r * std::size_t(O) + o;
      out[i] = bias ? parts[i] + bias[o] : parts[i];
    }
}

// Buffers only grow (AlignedBuffer::resize reallocates): the passes allocate nothing once warm.
void grow(AlignedBuffer<float>& b, std::size_t n) {
  if (b.size() < n) b.resize(n);
}

// One thread's scratch: a chunk's inputs and weights, the chunks' partial sums, and zeros (grown zeroed,
// never written: a bias of nothing).
struct ChunkScratch {
  AlignedBuffer<float> x, w, parts, zeros;
};
thread_local ChunkScratch scratch;

}  // namespace

void chunked_linear_forward(const ops::KernelTable& k, float* out, const float* x, const float* W, const float* bias,
                            int rows, int I, int O, int chunks) {
  check_chunks(chunks, I, "input features");
  if (k.linear_forward_chunked) {  // the table's fused pass: the same tree, no copies (ops/kernels.h)
    k.linear_forward_chunked(out, x, W, bias, {rows, I, O}, chunks);
    return;
  }
  // The composition (the reference table and the 16-bit tables without dot-product kernels): one
  // linear_forward a chunk on copies, then the tree.
  ChunkScratch& s = scratch;
  const int Ic = I / chunks;
  const std::size_t n = std::size_t(rows) * O;
  if (chunks == 1) {  // one chunk (a rank holding one head's share): no copies, the bias after the sum
    grow(s.zeros, std::size_t(O));
    k.linear_forward(out, x, W, s.zeros.data(), {rows, I, O});
    if (bias) tree_sum(out, out, 1, n, bias, O);
    return;
  }
  grow(s.x, std::size_t(rows) * Ic);
  grow(s.w, std::size_t(O) * Ic);  // the chunk's weight columns
  grow(s.parts, n * std::size_t(chunks));
  grow(s.zeros, std::size_t(O));
  for (int c = 0; c < chunks; ++c) {
    for (int r = 0; r < rows; ++r)
      std::memcpy(s.x.data() + std::size_t(r) * Ic, x + std::size_t(r) * I + std::size_t(c) * Ic, Ic * sizeof(float));
    for (int o = 0; o < O; ++o)
      std::memcpy(s.w.data() + std::size_t(o) * Ic, W + std::size_t(o) * I + std::size_t(c) * Ic, Ic * sizeof(float));
    k.linear_forward(s.parts.data() + std::size_t(c) * n, s.x.data(), s.w.data(), s.zeros.data(), {rows, Ic, O});
  }
  tree_sum(out, s.parts.data(), chunks, n, bias, O);
}

void chunked_linear_backward_data(const ops::KernelTable& k, float* din, const float* dout, const float* W, int rows,
                                  int O, int I, int chunks, int groups) {
  if (groups < 1 || O % groups != 0) throw Error("tensor-parallel sum: output features not in equal groups");
  check_chunks(chunks, O / groups, "output features per group");
  if (k.linear_backward_data_chunked && groups <= ops::KernelTable::kMaxChunkSegments) {  // fused (ops/kernels.h)
    k.linear_backward_data_chunked(din, dout, W, {rows, I, O}, chunks, groups);
    return;
  }
  ChunkScratch& s = scratch;
  const int block = O / groups / chunks, Oc = block * groups;  // a chunk: `groups` blocks of `block` features
  const std::size_t n = std::size_t(rows) * I;
  grow(s.x, std::size_t(rows) * Oc);
  grow(s.w, std::size_t(I) * Oc);  // the chunk's weight rows transposed [I, Oc]
  grow(s.parts, chunks > 1 ? n * std::size_t(chunks) : 0);
  grow(s.zeros, std::size_t(I));
  for (int c = 0; c < chunks; ++c) {
    for (int g = 0; g < groups; ++g) {
      const int from = g * (O / groups) + c * block;  // this group's block of chunk c
      for (int r = 0; r < rows; ++r)
        std::memcpy(s.x.data() + std::size_t(r) * Oc + std::size_t(g) * block, dout + std::size_t(r) * O + from,
                    block * sizeof(float));
      for (int j = 0; j < block; ++j)
        for (int i = 0; i < I; ++i) s.w[std::size_t(i) * Oc + std::size_t(g) * block + j] = W[std::size_t(from + j) * I + i];
    }
    // din_c [rows, I] = dout_c [rows, Oc] W_c [Oc, I]: a linear forward with weight W_c^T [I, Oc].
    k.linear_forward(chunks > 1 ? s.parts.data() + std::size_t(c) * n : din, s.x.data(), s.w.data(), s.zeros.data(),
                     {rows, Oc, I});
  }
  if (chunks > 1) tree_sum(din, s.parts.data(), chunks, n, nullptr, I);
}

}  // namespace ringtrain::nn
