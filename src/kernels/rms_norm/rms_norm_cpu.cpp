// CPU rms_norm: rows in parallel (OpenMP), fp32 accumulation.
#include <cmath>
#include <vector>

#include "backends/cpu/chunked_sum.h"
#include "core/dispatch.h"
#include "kernels/rms_norm/rms_norm.h"

namespace anvil {

template <class T>
static void fwd(const T* x, const T* w, float eps, T* y, float* rstd, int64_t N, int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++) {
    const T* xr = x + n * C;
    float ss = 0;
    for (int64_t c = 0; c < C; c++) {
      float v = to_f32(xr[c]);
      ss += v * v;
    }
    float r = 1.f / std::sqrt(ss / float(C) + eps);
    for (int64_t c = 0; c < C; c++) y[n * C + c] = from_f32<T>(to_f32(xr[c]) * r * to_f32(w[c]));
    rstd[n] = r;
  }
}

template <class T>
static void bwd(const T* dy, const T* x, const T* w, const float* rstd, T* dx, float* dw, int64_t N, int64_t C) {
  auto dw_acc = cpu::chunked_sum(N, C, [&](int64_t n0, int64_t n1, float* local) {
    for (int64_t n = n0; n < n1; n++) {
      const float r = rstd[n];
      float dot = 0;
      for (int64_t c = 0; c < C; c++) dot += to_f32(dy[n * C + c]) * to_f32(w[c]) * to_f32(x[n * C + c]) * r;
      dot /= float(C);
      for (int64_t c = 0; c < C; c++) {
        float g = to_f32(dy[n * C + c]), xhat = to_f32(x[n * C + c]) * r;
        dx[n * C + c] = from_f32<T>(r * (g * to_f32(w[c]) - xhat * dot));
        local[c] += g * xhat;
      }
    }
  });
  for (int64_t c = 0; c < C; c++) dw[c] += dw_acc[size_t(c)];
}

void rms_norm_fwd_cpu(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd) {
  const int64_t C = x.size(-1), N = x.numel() / C;
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       fwd<T>(x.data<T>(), w.data<T>(), eps, y.data<T>(), rstd.data<float>(), N, C));
}
void rms_norm_bwd_cpu(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw) {
  const int64_t C = x.size(-1), N = x.numel() / C;
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       bwd<T>(dy.data<T>(), x.data<T>(), w.data<T>(), rstd.data<float>(), dx.data<T>(),
                              dw.data<float>(), N, C));
}

}  // namespace anvil
