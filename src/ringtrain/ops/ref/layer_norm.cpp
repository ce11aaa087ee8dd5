// Reference layer normalisation over the last dimension (ops/layer_norm.h), row sums in double.
#include "ringtrain/ops/layer_norm.h"

#include <cmath>

namespace ringtrain::ops::ref {

template <typename T>
void layer_norm_forward(T* out, T* save_mean, T* save_rstd, const T* x, const T* weight, const T* bias,
                        const LayerNormShape& s, double eps) {
  for (int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * s.dim;
    double sum = 0.0;
    for (int i = 0; i < s.dim; ++i) sum += xr[i];
    const double mean = sum / s.dim;
    double sq = 0.0;
    for (int i = 0; i < s.dim; ++i) sq += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    const double rstd = 1.0 / std::sqrt(sq / s.dim + eps);
    save_mean[r] = T(mean);
    save_rstd[r] = T(rstd);
    for (int i = 0; i < s.dim; ++i)
      out[r * s.dim + i] = T((double(xr[i]) - mean) * rstd * double(weight[i]) + double(bias[i]));
  }
}

template <typename T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,
                         const T* save_mean, const T* save_rstd, const LayerNormShape& s) {
  for (int i = 0; i < s.dim; ++i) dweight[i] = dbias[i] = T(0);
  for (int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * s.dim;
    const T* dr = dout + r * s.dim;
    const double mean = save_mean[r], rstd = save_rstd[r];
    double sum_g = 0.0, sum_g_xhat = 0.0;
    for (int i = 0; i < s.dim; ++i) {
      const double xhat = (double(xr[i]) - mean) * rstd, g = double(dr[i]) * double(weight[i]);
      sum_g += g;
      sum_g_xhat += g * xhat;
      dweight[i] = T(double(dweight[i]) + double(dr[i]) * xhat);
      dbias[i] = T(double(dbias[i]) + double(dr[i]));
    }
    if (!dx) continue;
    const double mg = sum_g / s.dim, mgx = sum_g_xhat / s.dim;
    for (int i = 0; i < s.dim; ++i) {
      const double xhat = (double(xr[i]) - mean) * rstd;
      const T v = T(rstd * (double(dr[i]) * double(weight[i]) - mg - xhat * mgx));
      dx[r * s.dim + i] = s.accumulate_dx ? T(dx[r * s.dim + i] + v) : v;
    }
  }
}

template void layer_norm_forward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const LayerNormShape&, double);
template void layer_norm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const LayerNormShape&, double);
template void layer_norm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                         const float*, const float*, const LayerNormShape&);
template void layer_norm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                          const double*, const double*, const LayerNormShape&);

}  // namespace ringtrain::ops::ref
