// The sums a tensor-parallel split cuts, in one fixed order whatever the split, so that vit under --tp T
// computes one process's bits (issue 15: --tp 2 ends with the weights of one rank).
//
// A row-parallel linear's forward sums over its input features, a column-parallel one's backward-data over
// its output features; --tp T cuts that sum into T partial sums that the tensor group's all-reduce adds.
// One process would run one GEMM over the whole length, whose rounding differs from partial sums added
// afterwards (the fp32 differences that Adam then magnifies: 6e-5 after 30 steps, measured). So both run
// the same chunked sum: the length in C equal chunks (C = vit's 4 heads; T must divide C), one GEMM a
// chunk, the chunks' results added as a pairwise tree ((c0 + c1) + (c2 + c3)), the bias added last. A rank
// holding C/T chunks adds its own as the same subtree, and the tensor group's all-reduce adds the ranks'
// subtrees in the same tree (2 ranks: a + b, which is b + a; 4 ranks: recursive doubling pairs 0-1 and 2-3
// first), so every rank ends with the one-process sum bit for bit.
#pragma once
#include <cstdint>

#include "ringtrain/ops/kernels.h"

namespace ringtrain::nn {

// The chunks vit's split sums are cut into: its heads (an attention chunk is one head's features).
constexpr int kTpChunks = 4;

// out [rows, O] = sum over the `chunks` equal blocks of the I input features of x[:, block] W[:, block]^T
// (x [rows, I], W [O, I]), as a pairwise tree, then + bias (null: none). chunks must divide I (a power of
// two for a tree that aligns with every power-of-two split).
// Both use a per-thread scratch that only grows (thread slices may call them at once).
void chunked_linear_forward(const ops::KernelTable& k, float* out, const float* x, const float* W, const float* bias,
                            int rows, int I, int O, int chunks);

// din [rows, I] = sum over chunks c of dout[:, cols(c)] W[cols(c), :] (dout [rows, O], W [O, I]) as a pairwise
// tree, where the O output features are `groups` equal groups (vit's packed q, k, v: 3) of `chunks` equal
// blocks each, and chunk c is the c-th block of every group (one head's q, k and v rows).
void chunked_linear_backward_data(const ops::KernelTable& k, float* din, const float* dout, const float* W, int rows,
                                  int O, int I, int chunks, int groups);

}  // namespace ringtrain::nn
