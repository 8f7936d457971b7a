// The prologue of the fused ops (SkinnyPrologue, skinny_gemm.h: an RMSNorm, with or without the residual add, or
// SwiGLU) for the op cases that take one: its inputs drawn, and its x in fp64 from those same rounded inputs.
#pragma once
#include <cmath>
#include <vector>

#include "harness.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil::test {

enum class Pro { norm, add_norm, swiglu };
inline const char* pro_name(Pro p) {
  return p == Pro::norm ? "rms_norm" : p == Pro::add_norm ? "add_rms_norm" : "swiglu";
}

// Residual-stream-like values (a ~ 1, b ~ 0.5) and a gamma around 1; gate/up (a, M x 2K) ~ 2 so SiLU's curve is
// exercised. Seeds seed + 11, 12, 13.
struct ProInputs {
  Pro pro;
  int64_t M, K;
  DType dt;
  std::vector<float> a, b, g;
  ProInputs(Pro pro, int64_t M, int64_t K, DType dt, uint64_t seed)
      : pro(pro), M(M), K(K), dt(dt),
        a(rand_normal(size_t(M * (pro == Pro::swiglu ? 2 * K : K)), seed, 11, pro == Pro::swiglu ? 2.f : 1.f, dt)),
        b(rand_normal(size_t(M * K), seed, 12, 0.5f, dt)),
        g(rand_uniform(size_t(K), seed, 13, 0.5f, 1.5f, dt)) {}
  int64_t a_cols() const { return pro == Pro::swiglu ? 2 * K : K; }
};

// The prologue over device tensors of those inputs; th receives h (add_norm only).
inline SkinnyPrologue make_prologue(Pro pro, const Tensor& ta, const Tensor& tb, const Tensor& tg, float eps,
                                    const Tensor& th) {
  return pro == Pro::swiglu ? SkinnyPrologue::swiglu(ta)
         : pro == Pro::norm ? SkinnyPrologue::rms_norm(ta, tg, eps)
                            : SkinnyPrologue::add_rms_norm(ta, tb, tg, eps, th);
}

// x (M, K) unrounded, and h (M, K) rounded into the inputs' dtype as add_rms_norm stores it (norms only).
inline void prologue_ref(const ProInputs& in, float eps, std::vector<double>& x, std::vector<double>& h) {
  const int64_t M = in.M, K = in.K;
  x.assign(size_t(M * K), 0.0), h.assign(size_t(M * K), 0.0);
  for (int64_t m = 0; m < M; m++) {
    if (in.pro == Pro::swiglu) {
      for (int64_t k = 0; k < K; k++) {
        const double gv = in.a[size_t(m * 2 * K + k)], uv = in.a[size_t(m * 2 * K + K + k)];
        x[size_t(m * K + k)] = gv / (1.0 + std::exp(-gv)) * uv;
      }
      continue;
    }
    double ss = 0;
    for (int64_t k = 0; k < K; k++) {
      const size_t i = size_t(m * K + k);
      h[i] = in.pro == Pro::add_norm ? double(round_to(in.dt, in.a[i] + in.b[i])) : double(in.a[i]);
      ss += h[i] * h[i];
    }
    const double r = 1.0 / std::sqrt(ss / double(K) + eps);
    for (int64_t k = 0; k < K; k++) x[size_t(m * K + k)] = h[size_t(m * K + k)] * r * in.g[size_t(k)];
  }
}

}  // namespace anvil::test
