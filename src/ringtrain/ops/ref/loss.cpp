// Reference softmax cross-entropy.
#include "ringtrain/ops/loss.h"

#include <cmath>

namespace ringtrain::ops::ref {

template <typename T>
T softmax_xent_forward(T* probs, const T* logits, const uint8_t* labels, int N, int K) {
  T total = T(0);
  for (int n = 0; n < N; ++n) {
    const T* row = logits + int64_t(n) * K;
    T* prob = probs + int64_t(n) * K;
    T maxv = row[0];
    for (int k = 1; k < K; ++k) maxv = row[k] > maxv ? row[k] : maxv;
    T sum = T(0);
    for (int k = 0; k < K; ++k) {
      prob[k] = std::exp(row[k] - maxv);
      sum += prob[k];
    }
    for (int k = 0; k < K; ++k) prob[k] /= sum;
    // log softmax of the true class, computed without dividing: stable for tiny probabilities.
    total += -(row[labels[n]] - maxv - std::log(sum));
  }
  return total / T(N);
}

template <typename T>
void softmax_xent_backward(T* dlogits, const T* probs, const uint8_t* labels, int N, int K, T scale) {
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      int64_t i = int64_t(n) * K + k;
      dlogits[i] = (probs[i] - (k == labels[n] ? T(1) : T(0))) * scale;
    }
}

template float softmax_xent_forward<float>(float*, const float*, const uint8_t*, int, int);
template double softmax_xent_forward<double>(double*, const double*, const uint8_t*, int, int);
template void softmax_xent_backward<float>(float*, const float*, const uint8_t*, int, int, float);
template void softmax_xent_backward<double>(double*, const double*, const uint8_t*, int, int, double);

}  // namespace ringtrain::ops::ref
