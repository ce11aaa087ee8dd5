// Softmax cross-entropy, mean over the batch (PyTorch's F.cross_entropy, reduction='mean').
// Shapes: logits [N,K], labels [N] in [0,K), probs [N,K] (softmax, saved for backward).
#pragma once
#include <cstdint>

namespace ringtrain::ops {
namespace ref {
// Returns the mean loss; writes probs. Numerically stable (subtracts the row max).
template <typename T>
T softmax_xent_forward(T* probs, const T* logits, const uint8_t* labels, int N, int K);
// dlogits = (probs - onehot(labels)) * scale, scale usually 1/N (overwrites).
template <typename T>
void softmax_xent_backward(T* dlogits, const T* probs, const uint8_t* labels, int N, int K, T scale);
}  // namespace ref
}  // namespace ringtrain::ops
