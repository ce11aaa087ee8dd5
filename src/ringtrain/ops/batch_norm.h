// Batch normalisation over [N, C, HW] (torch.nn.BatchNorm2d; HW = H * W), per channel c:
//   training: mean_c and the biased variance var_c over the N * HW values of the batch;
//             out = (x - mean_c) * invstd_c * gamma_c + beta_c, invstd_c = 1 / sqrt(var_c + eps);
//             running_mean = (1 - momentum) running_mean + momentum mean_c,
//             running_var  = (1 - momentum) running_var  + momentum var_c * n / (n - 1)  (the UNBIASED
//             variance, n = N * HW > 1, as torch does); mean_c and invstd_c are saved for backward.
//   eval:     the same affine map with running_mean / running_var in place of the batch statistics.
// Backward (both modes) overwrites dx (may be null), dgamma and dbeta. In training mode dx carries the
// dependence of the statistics on every sample:
//   dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)),  xhat = (x - mean) invstd.
// The reference accumulates channel sums in double whatever T is: it is the oracle, and a float sum over
// N * HW (up to ~10^6 values for the zoo's first layers) would be a poor one.
//
// A following ReLU or ReLU6 can be fused (BatchNormShape::act): forward writes y = act(bn(x)), the same bits
// as the separate layer's pass over bn's output, without that pass (nor its buffer); backward takes dout =
// dL/dy and y and normalises through dout where act passes a gradient (ReLU: y > 0; ReLU6: 0 < y < 6, as
// those layers' backward), the same bits as the separate pass before it. mobilenet_v2's 35 pairs: a read
// and a write of every activation less in forward, a read and a write less in backward.
#pragma once
#include <cstdint>

namespace ringtrain::ops {

enum class BnActivation { None, Relu, Relu6 };

struct BatchNormShape {
  int N = 1, C = 1, HW = 1;
  BnActivation act = BnActivation::None;
  // The training passes work on channels [c_begin, c_end) of the C (c_end < 0: all of them) and touch
  // nothing of the others: the statistics of a channel are its own, so threads can split the channels
  // (nn::BatchNorm2d under --threads) with the same bits as one pass over all of them.
  int c_begin = 0, c_end = -1;
  int64_t count() const { return int64_t(N) * HW; }  // values per channel
  int channels_end() const { return c_end < 0 ? C : c_end; }
};

namespace ref {
// running_mean / running_var may be null (no update).
template <typename T>
void batch_norm_forward_train(T* out, T* save_mean, T* save_invstd, T* running_mean, T* running_var, const T* x,
                              const T* gamma, const T* beta, const BatchNormShape& s, double eps, double momentum);
template <typename T>
void batch_norm_forward_eval(T* out, const T* x, const T* gamma, const T* beta, const T* running_mean,
                             const T* running_var, const BatchNormShape& s, double eps);
// y: the forward's output, read only under a fused activation (may be null without one).
template <typename T>
void batch_norm_backward_train(T* dx, T* dgamma, T* dbeta, const T* dout, const T* y, const T* x, const T* gamma,
                               const T* save_mean, const T* save_invstd, const BatchNormShape& s);
template <typename T>
void batch_norm_backward_eval(T* dx, T* dgamma, T* dbeta, const T* dout, const T* y, const T* x, const T* gamma,
                              const T* running_mean, const T* running_var, const BatchNormShape& s, double eps);
}  // namespace ref

}  // namespace ringtrain::ops
