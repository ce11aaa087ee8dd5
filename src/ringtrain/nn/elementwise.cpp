#include "ringtrain/nn/elementwise.h"

#include <cstring>

#include "ringtrain/core/error.h"
#include "ringtrain/ops/elementwise.h"

namespace ringtrain::nn {

// ---- Add ----
Shape Add::configure(const Shape&) { throw Error(name_ + ": takes two inputs"); }

Shape Add::configure_inputs(const std::vector<Shape>& in) {
  check(in.size() == 2 && in[0] == in[1], name_ + ": expects two inputs of one shape, got " +
                                              (in.empty() ? std::string("none") : shape_str(in[0])) +
                                              (in.size() > 1 ? " and " + shape_str(in[1]) : std::string()));
  per_sample_ = shape_numel(in[0]);
  return in[0];
}

void Add::forward(const ops::KernelTable&, ParameterSet&, const float*, float*, int) {
  throw Error(name_ + ": takes two inputs (forward_inputs)");
}

void Add::backward(const ops::KernelTable&, ParameterSet&, const float*, const float*, const float*, float*, int) {
  throw Error(name_ + ": takes two inputs (backward_inputs)");
}

void Add::forward_inputs(const ops::KernelTable& k, ParameterSet&, const float* const* in, float* out, const Slice& s) {
  if (!s.empty()) k.add_forward(out, in[0], in[1], s.size() * per_sample_);
}

void Add::backward_inputs(const ops::KernelTable&, ParameterSet&, const float* const*, const float*, const float* dout,
                          float* const* din, const Slice& s) {
  const std::size_t bytes = std::size_t(s.size() * per_sample_) * sizeof(float);
  for (int i = 0; i < 2; ++i)
    if (din[i] && din[i] != dout && bytes) std::memcpy(din[i], dout, bytes);  // (din == dout: Model's grad_home_)
}

// ---- Dropout ----
Dropout::Dropout(std::string name, double p)
    : Layer(std::move(name)), p_(0.0), salt_(ops::dropout_salt(name_.c_str())) {
  set_p(p);
}

void Dropout::set_p(double p) {
  check(p >= 0.0 && p <= 1.0, name_ + ": dropout probability must be in [0, 1], got " + std::to_string(p));
  p_ = p;
}

Shape Dropout::configure(const Shape& in) {
  per_sample_ = shape_numel(in);
  return in;
}

void Dropout::apply(const ops::KernelTable& k, float* dst, const float* src, const Slice& s) const {
  if (s.empty()) return;
  if (!training() || p_ == 0.0) {
    std::memcpy(dst, src, std::size_t(s.size() * per_sample_) * sizeof(float));
    return;
  }
  const StepContext& c = context();
  ops::DropoutShape d;
  d.N = s.size();
  d.F = per_sample_;
  d.p = p_;
  d.seed = c.seed;
  d.step = c.step;
  d.sample_ids = c.sample_ids ? c.sample_ids + s.n0 : nullptr;
  d.first_sample = s.n0;
  d.salt = salt_;
  k.dropout_forward(dst, src, d);
}

void Dropout::forward_slice(const ops::KernelTable& k, ParameterSet&, const float* in, float* out, const Slice& s) {
  apply(k, out, in, s);
}

void Dropout::backward_slice(const ops::KernelTable& k, ParameterSet&, const float*, const float*, const float* dout,
                             float* din, const Slice& s) {
  if (din) apply(k, din, dout, s);  // the same mask and scale: a pure function of the context
}

// ---- Flatten ----
Shape Flatten::configure(const Shape& in) {
  per_sample_ = shape_numel(in);
  return {per_sample_};
}

void Flatten::forward_slice(const ops::KernelTable&, ParameterSet&, const float* in, float* out, const Slice& s) {
  if (!s.empty()) std::memcpy(out, in, std::size_t(s.size() * per_sample_) * sizeof(float));
}

void Flatten::backward_slice(const ops::KernelTable&, ParameterSet&, const float*, const float*, const float* dout,
                             float* din, const Slice& s) {
  if (din && !s.empty()) std::memcpy(din, dout, std::size_t(s.size() * per_sample_) * sizeof(float));
}

}  // namespace ringtrain::nn
