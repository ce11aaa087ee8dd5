// The core of multi-head self-attention (torch.nn.MultiheadAttention, batch_first, no mask, no dropout),
// between its input and output projections (which are linear ops):
//   qkv [N, T, 3D]: PyTorch's packed in-projection output, q = columns [0, D), k = [D, 2D), v = [2D, 3D);
//   head h owns columns h*hd .. (h+1)*hd - 1 of each block, hd = D / H;
//   probs [N, H, T, T] = softmax over j of q_i . k_j / sqrt(hd) (saved for backward);
//   out [N, T, D] = per head probs v, heads concatenated (column h*hd + d).
// Backward overwrites dqkv [N, T, 3D]:
//   dP = dout v^T, dS = P o (dP - rowsum(dP o P)) / sqrt(hd), dq = dS k, dk = dS^T q, dv = P^T dout.
#pragma once

namespace ringtrain::ops {

struct AttentionShape {
  int N = 1, T = 1, D = 1, H = 1;
  int hd() const { return D / H; }
  // Multiply-adds of q k^T and probs v.
  double macs() const { return 2.0 * N * T * T * D; }
};

namespace ref {
template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const AttentionShape& s);
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, const AttentionShape& s);
}  // namespace ref

}  // namespace ringtrain::ops
