// Reference batch normalisation: direct loops, channel sums in double (ops/batch_norm.h).
#include "ringtrain/ops/batch_norm.h"

#include <cmath>
#include <cstdint>

#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/pointwise.h"

namespace ringtrain::ops::ref {
namespace {

template <typename T>
const T* plane(const T* x, const BatchNormShape& s, int n, int c) {
  return x + (int64_t(n) * s.C + c) * s.HW;
}
template <typename T>
T* plane(T* x, const BatchNormShape& s, int n, int c) {
  return x + (int64_t(n) * s.C + c) * s.HW;
}

// out = act((x - mean) * invstd * gamma + beta) for channel c: the fused activation is the separate layer's
// own reference (relu_forward, relu6_forward) on the rounded plane.
template <typename T>
void normalise(T* out, const T* x, double mean, double invstd, double gamma, double beta, const BatchNormShape& s,
               int c) {
  for (int n = 0; n < s.N; ++n) {
    const T* xp = plane(x, s, n, c);
    T* op = plane(out, s, n, c);
    for (int i = 0; i < s.HW; ++i) op[i] = T((double(xp[i]) - mean) * invstd * gamma + beta);
    if (s.act == BnActivation::Relu) relu_forward(op, op, s.HW);
    if (s.act == BnActivation::Relu6) relu6_forward(op, op, s.HW);
  }
}

// The gradient the normalisation sees at element i of sample n, channel c: dout, or dout through the fused
// activation's own reference backward (relu_backward, relu6_backward) on its output y.
template <typename T>
double grad_in(const T* dout, const T* y, const BatchNormShape& s, int n, int c, int i) {
  const T d = plane(dout, s, n, c)[i];
  T g = d;
  if (s.act == BnActivation::Relu) relu_backward(&g, &d, plane(y, s, n, c) + i, 1);
  if (s.act == BnActivation::Relu6) relu6_backward(&g, &d, plane(y, s, n, c) + i, 1);
  return double(g);
}

}  // namespace

template <typename T>
void batch_norm_forward_train(T* out, T* save_mean, T* save_invstd, T* running_mean, T* running_var, const T* x,
                              const T* gamma, const T* beta, const BatchNormShape& s, double eps, double momentum) {
  const double count = double(s.count());
  for (int c = s.c_begin; c < s.channels_end(); ++c) {
    double sum = 0.0;
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.HW; ++i) sum += plane(x, s, n, c)[i];
    const double mean = sum / count;
    double sq = 0.0;  // two passes: no cancellation between E[x^2] and mean^2
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.HW; ++i) {
        const double d = double(plane(x, s, n, c)[i]) - mean;
        sq += d * d;
      }
    const double var = sq / count;
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean[c] = T(mean);
    save_invstd[c] = T(invstd);
    if (running_mean) running_mean[c] = T((1.0 - momentum) * double(running_mean[c]) + momentum * mean);
    if (running_var)
      running_var[c] = T((1.0 - momentum) * double(running_var[c]) + momentum * (sq / (count - 1.0)));
    normalise(out, x, mean, invstd, double(gamma[c]), double(beta[c]), s, c);
  }
}

template <typename T>
void batch_norm_forward_eval(T* out, const T* x, const T* gamma, const T* beta, const T* running_mean,
                             const T* running_var, const BatchNormShape& s, double eps) {
  for (int c = 0; c < s.C; ++c)
    normalise(out, x, double(running_mean[c]), 1.0 / std::sqrt(double(running_var[c]) + eps), double(gamma[c]),
              double(beta[c]), s, c);
}

template <typename T>
void batch_norm_backward_train(T* dx, T* dgamma, T* dbeta, const T* dout, const T* y, const T* x, const T* gamma,
                               const T* save_mean, const T* save_invstd, const BatchNormShape& s) {
  const double count = double(s.count());
  for (int c = s.c_begin; c < s.channels_end(); ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.HW; ++i) {
        const double dy = grad_in(dout, y, s, n, c, i);
        sum_dy += dy;
        sum_dy_xhat += dy * (double(plane(x, s, n, c)[i]) - mean) * invstd;
      }
    dgamma[c] = T(sum_dy_xhat);
    dbeta[c] = T(sum_dy);
    if (!dx) continue;
    const double k = double(gamma[c]) * invstd, mdy = sum_dy / count, mdyx = sum_dy_xhat / count;
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.HW; ++i) {
        const double xhat = (double(plane(x, s, n, c)[i]) - mean) * invstd;
        plane(dx, s, n, c)[i] = T(k * (grad_in(dout, y, s, n, c, i) - mdy - xhat * mdyx));
      }
  }
}

template <typename T>
void batch_norm_backward_eval(T* dx, T* dgamma, T* dbeta, const T* dout, const T* y, const T* x, const T* gamma,
                              const T* running_mean, const T* running_var, const BatchNormShape& s, double eps) {
  for (int c = 0; c < s.C; ++c) {
    const double mean = running_mean[c], invstd = 1.0 / std::sqrt(double(running_var[c]) + eps);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int n = 0; n < s.N; ++n)
      for (int i = 0; i < s.HW; ++i) {
        const double dy = grad_in(dout, y, s, n, c, i);
        sum_dy += dy;
        sum_dy_xhat += dy * (double(plane(x, s, n, c)[i]) - mean) * invstd;
        if (dx) plane(dx, s, n, c)[i] = T(dy * double(gamma[c]) * invstd);
      }
    dgamma[c] = T(sum_dy_xhat);
    dbeta[c] = T(sum_dy);
  }
}

#define RINGTRAIN_BN(T)                                                                                        \
  template void batch_norm_forward_train<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*,                 \
                                            const BatchNormShape&, double, double);                           \
  template void batch_norm_forward_eval<T>(T*, const T*, const T*, const T*, const T*, const T*,               \
                                           const BatchNormShape&, double);                                    \
  template void batch_norm_backward_train<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,     \
                                             const T*, const BatchNormShape&);                                \
  template void batch_norm_backward_eval<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,      \
                                            const T*, const BatchNormShape&, double);
RINGTRAIN_BN(float)
RINGTRAIN_BN(double)
#undef RINGTRAIN_BN

}  // namespace ringtrain::ops::ref
