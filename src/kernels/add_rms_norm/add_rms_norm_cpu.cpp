// CPU add_rms_norm: rows in parallel (OpenMP), fp32 accumulation. The backward is rms_norm_cpu's loop with
// the residual gradient added.
#include <cmath>
#include <vector>

#include "backends/cpu/chunked_sum.h"
#include "core/dispatch.h"
#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/elementwise/fp8_io.h"

namespace anvil {

template <class T, class TO>
static void fwd(const T* a, const T* b, const T* w, float eps, T* h, TO* y, float* rstd, float inv_scale, int64_t N,
                int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++) {
    float ss = 0;
    for (int64_t c = 0; c < C; c++) {  // h may be a or b: each element is read before it is written
      const T hv = from_f32<T>(to_f32(a[n * C + c]) + to_f32(b[n * C + c]));
      h[n * C + c] = hv;
      ss += to_f32(hv) * to_f32(hv);
    }
    const float r = 1.f / std::sqrt(ss / float(C) + eps);
    for (int64_t c = 0; c < C; c++) y[n * C + c] = from_f32<TO>(to_f32(h[n * C + c]) * r * to_f32(w[c]) * inv_scale);
    rstd[n] = r;
  }
}

template <class T>
static void bwd(const T* dy, const T* dh_in, const T* h, const T* w, const float* rstd, T* dh, float* dw, int64_t N,
                int64_t C) {
  auto dw_acc = cpu::chunked_sum(N, C, [&](int64_t n0, int64_t n1, float* local) {
    for (int64_t n = n0; n < n1; n++) {
      const float r = rstd[n];
      float dot = 0;
      for (int64_t c = 0; c < C; c++) dot += to_f32(dy[n * C + c]) * to_f32(w[c]) * to_f32(h[n * C + c]) * r;
      dot /= float(C);
      for (int64_t c = 0; c < C; c++) {
        const float g = to_f32(dy[n * C + c]), hhat = to_f32(h[n * C + c]) * r;
        const float resid = dh_in ? to_f32(dh_in[n * C + c]) : 0.f;  // dh may be dh_in: read first
        dh[n * C + c] = from_f32<T>(resid + r * (g * to_f32(w[c]) - hhat * dot));
        local[c] += g * hhat;
      }
    }
  });
  for (int64_t c = 0; c < C; c++) dw[c] += dw_acc[size_t(c)];
}

void add_rms_norm_fwd_cpu(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                          Tensor& rstd, const Tensor& y_scale) {
  const int64_t C = a.size(-1), N = a.numel() / C;
  const float inv_scale = y_scale.defined() ? 1.f / y_scale.data<float>()[0] : 1.f;
  ANVIL_DISPATCH_FLOAT(a.dtype(), T, {
    ANVIL_DISPATCH_OUT(y.dtype(), T, TO,
                       fwd<T, TO>(a.data<T>(), b.data<T>(), w.data<T>(), eps, h.data<T>(), y.data<TO>(),
                                  rstd.data<float>(), inv_scale, N, C));
  });
}

void add_rms_norm_bwd_cpu(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w,
                          const Tensor& rstd, Tensor& dh, Tensor& dw) {
  const int64_t C = h.size(-1), N = h.numel() / C;
  ANVIL_DISPATCH_FLOAT(h.dtype(), T,
                       bwd<T>(dy.data<T>(), dh_in.defined() ? dh_in.data<T>() : nullptr, h.data<T>(), w.data<T>(),
                              rstd.data<float>(), dh.data<T>(), dw.data<float>(), N, C));
}

}  // namespace anvil
