// conv2d: cross-correlation as in PyTorch's nn.Conv2d (dilation = 1), with groups.
// Shapes (documented once): inp [N,C,H,W], weight [K,C/groups,R,S], bias [K], out [N,K,P,Q]
// with P = (H + 2*pad - R) / stride + 1 and Q = (W + 2*pad - S) / stride + 1.
// Groups: C and K are multiples of groups; output channel k reads input channels
// [g*C/groups, (g+1)*C/groups) with g = k / (K/groups). groups == C == K is a depthwise conv.
#pragma once

namespace ringtrain::ops {

struct Conv2dShape {
  int N = 1, C = 1, H = 1, W = 1;  // input
  int K = 1, R = 1, S = 1;          // output channels, kernel height, kernel width
  int stride = 1, pad = 0;
  int groups = 1;
  // Blocked activations (conv_pool.h; fused passes of tables with conv2d_relu_pool_blocked only): the input and
  // its gradient (in_blocked), the output and its gradient (out_blocked) as [N/B][features][B] - B samples side
  // by side, in the table's activation type - instead of [N][features] fp32.
  bool in_blocked = false, out_blocked = false;
  int P() const { return (H + 2 * pad - R) / stride + 1; }
  int Q() const { return (W + 2 * pad - S) / stride + 1; }
  int Cg() const { return C / groups; }  // input channels per group (the weight's second extent)
  int Kg() const { return K / groups; }  // output channels per group
  // Multiply-adds of one pass (forward, backward-data and backward-weight each cost this).
  double macs() const { return double(N) * K * P() * Q() * Cg() * R * S; }
};

namespace ref {
// out = conv(inp, weight) + bias. bias may be null.
template <typename T>
void conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, const Conv2dShape& s);
// dinp = conv_transpose(dout, weight). Overwrites dinp.
template <typename T>
void conv2d_backward_data(T* dinp, const T* dout, const T* weight, const Conv2dShape& s);
// dweight = sum_n correlate(inp, dout); dbias = sum over N,P,Q of dout. Overwrites both; dbias may be null.
template <typename T>
void conv2d_backward_weight(T* dweight, T* dbias, const T* dout, const T* inp, const Conv2dShape& s);
}  // namespace ref

}  // namespace ringtrain::ops
