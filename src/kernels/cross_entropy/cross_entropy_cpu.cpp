// CPU row-wise pieces of the chunked cross-entropy (the GEMMs go through anvil::matmul). Rows in parallel.
#include <cmath>

#include "backends/cpu/simd.h"
#include "core/dispatch.h"
#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil {

void cross_entropy_chunk_fwd_cpu(const Tensor& logits, const Tensor& targets, int64_t v0, bool first, Tensor& m,
                                 Tensor& s, Tensor& tgt) {
  const int64_t N = logits.size(0), Vc = logits.size(1);
  const float* z = logits.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float *pm = m.data<float>(), *ps = s.data<float>(), *pt = tgt.data<float>();
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++) {
    const float* zr = z + n * Vc;
    float mx = -INFINITY;
    for (int64_t j = 0; j < Vc; j++) mx = std::max(mx, zr[j]);
    const float M = first ? mx : std::max(pm[n], mx);
    float sum = first ? 0.f : ps[n] * std::exp(pm[n] - M);  // rescale the earlier chunks to the new max
    float chunk = 0.f;  // cpu::exp_simd: the loop vectorises (a libm call per logit kept it scalar)
#pragma omp simd reduction(+ : chunk)
    for (int64_t j = 0; j < Vc; j++) chunk += cpu::exp_simd(zr[j] - M);
    sum += chunk;
    pm[n] = M;
    ps[n] = sum;
    if (first) pt[n] = 0.f;
    if (t[n] >= v0 && t[n] < v0 + Vc) pt[n] = zr[t[n] - v0];
  }
}

void cross_entropy_finish_cpu(const Tensor& m, const Tensor& s, const Tensor& tgt, const Tensor& targets,
                              Tensor& loss, Tensor& lse) {
  const int64_t N = m.size(0);
  const float *pm = m.data<float>(), *ps = s.data<float>(), *pt = tgt.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float *pl = loss.data<float>(), *pe = lse.data<float>();
  for (int64_t n = 0; n < N; n++) {
    pe[n] = pm[n] + std::log(ps[n]);
    pl[n] = t[n] < 0 ? 0.f : pe[n] - pt[n];
  }
}

template <class T>
static void chunk_bwd(const float* z, const int32_t* t, int64_t v0, const float* lse, const float* dloss, T* dz,
                      int64_t N, int64_t Vc) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++) {
    const float g = t[n] < 0 ? 0.f : dloss[n];
#pragma omp simd
    for (int64_t j = 0; j < Vc; j++) {
      const float p = cpu::exp_simd(z[n * Vc + j] - lse[n]) - (v0 + j == t[n] ? 1.f : 0.f);
      dz[n * Vc + j] = from_f32<T>(g * p);  // in place when T is float: each element read before written
    }
  }
}

void cross_entropy_chunk_bwd_cpu(const Tensor& logits, const Tensor& targets, int64_t v0, const Tensor& lse,
                                 const Tensor& dloss, Tensor& dlogits) {
  const int64_t N = logits.size(0), Vc = logits.size(1);
  ANVIL_DISPATCH_FLOAT(dlogits.dtype(), T,
                       chunk_bwd<T>(logits.data<float>(), targets.data<int32_t>(), v0, lse.data<float>(),
                                    dloss.data<float>(), dlogits.data<T>(), N, Vc));
}

template <class T>
static void cast(const float* x, T* y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) y[i] = from_f32<T>(x[i]);
}

void cross_entropy_cast_cpu(const Tensor& src, Tensor& dst) {
  ANVIL_DISPATCH_FLOAT(dst.dtype(), T, cast<T>(src.data<float>(), dst.data<T>(), src.numel()));
}

}  // namespace anvil
