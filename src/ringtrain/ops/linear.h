// linear: out = inp @ weight^T + bias, as in PyTorch's nn.Linear.
// Shapes: inp [N,I], weight [O,I], bias [O], out [N,O].
#pragma once

namespace ringtrain::ops {

struct LinearShape {
  int N = 1, I = 1, O = 1;
  double macs() const { return double(N) * I * O; }
};

namespace ref {
template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, const LinearShape& s);
// dinp = dout @ weight (overwritten; may be null), dweight = dout^T @ inp, dbias = sum_n dout (overwritten).
template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     const LinearShape& s);
}  // namespace ref

}  // namespace ringtrain::ops
