// One-lane "vector" for the scalar kernels: the same algorithms as the SIMD builds, compiled for the
// x86-64 baseline (the compiler may still use SSE2 on its own).
#pragma once
#include <cstddef>
#include <cstdint>

namespace ringtrain::ops::cpu {

struct VecScalar {
  static constexpr int L = 1;
  using R = float;
  using M = bool;
  static R zero() { return 0.0f; }
  static R set1(float x) { return x; }
  static R load(const float* p) { return *p; }
  static void store(float* p, R v) { *p = v; }
  static R gather_stride(const float* p, int) { return *p; }  // a column of a row-major matrix: one lane
  static void scatter_stride(float* p, int, R v) { *p = v; }
  static R fma(R a, R b, R c) { return a * b + c; }
  static R add(R a, R b) { return a + b; }
  static R mul(R a, R b) { return a * b; }
  // a * b, rounded: the empty asm keeps the compiler from fusing it into a later add (g++ contracts
  // a * b + c into an FMA by default in C++), for kernels that must match scalar code bit for bit.
  static R mul_rounded(R a, R b) {
    R p = mul(a, b);
    __asm__("" : "+x"(p));
    return p;
  }
  static R sub(R a, R b) { return a - b; }
  static R div(R a, R b) { return a / b; }
  static R sqrt(R a) { return __builtin_sqrtf(a); }
  static R select_gt(R x, R y, R a, R b) { return x > y ? a : b; }
  static R select_eq(R x, R y, R a, R b) { return x == y ? a : b; }
  static R where_eq(R x, R y, R a) { return x == y ? a : 0.0f; }
  static R where_gt(R x, R y, R a) { return x > y ? a : 0.0f; }
  static R unless_eq(R x, R y, R a) { return x == y ? 0.0f : a; }
  static R unless_gt(R x, R y, R a) { return x > y ? 0.0f : a; }
  // a > b ? a : b and a < b ? a : b (b when either is NaN, as the vector instructions).
  static R max(R a, R b) { return a > b ? a : b; }
  static R min(R a, R b) { return a < b ? a : b; }
  // Max-pool's rule (ops/pool.h): v replaces best if v > best, or if v is NaN and best is not.
  static M take_max(R v, R best) { return (v > best) | ((v != v) & (best == best)); }
  static R blend(M m, R a, R b) { return m ? a : b; }
  static void store_bytes(uint8_t* p, R v, int n) {
    if (n > 0) *p = uint8_t(int(v));
  }
  static R load_bytes(const uint8_t* p, int n) { return n > 0 ? float(*p) : 0.0f; }
  // Sums kept in double (batch norm's statistics): acc[0] += a, or += a * b (exact in double).
  static void add_to_double(double* acc, R a) { acc[0] += double(a); }
  static void fma_to_double(double* acc, R a, R b) { acc[0] += double(a) * double(b); }
  static float reduce_add(R v) { return v; }
  // A permutation within the one lane: x, or 0 where idx[0] < 0 (simd_avx512.h).
  struct Perm {
    bool keep;
  };
  static Perm perm(const int32_t* idx) { return {idx[0] >= 0}; }
  static R permute(R x, Perm p) { return p.keep ? x : 0.0f; }
  static M mask(int n) { return n > 0; }
  static M mask_where(const float* on) { return on[0] > 0.0f; }
  static R load_mask(const float* p, M m) { return m ? *p : 0.0f; }
  static void store_mask(float* p, R v, M m) {
    if (m) *p = v;
  }
  static void transpose(const float* src, std::size_t, float* dst, std::size_t) { *dst = *src; }
  static void transpose_regs(R*) {}
};

}  // namespace ringtrain::ops::cpu
