// CPU swiglu: rows in parallel, f32 math; the sigmoid through cpu::exp_simd (vectorisable, no libm call).
#include <cmath>

#include "backends/cpu/simd.h"
#include "core/dispatch.h"
#include "kernels/elementwise/fp8_io.h"
#include "kernels/swiglu/swiglu.h"

namespace anvil {

template <class T, class TO>
static void fwd(const T* gu, TO* out, float inv_scale, int64_t N, int64_t H) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++)
#pragma omp simd
    for (int64_t j = 0; j < H; j++) {
      const float g = to_f32(gu[n * 2 * H + j]), u = to_f32(gu[n * 2 * H + H + j]);
      out[n * H + j] = from_f32<TO>(g / (1.f + cpu::exp_simd(-g)) * u * inv_scale);
    }
}

template <class T>
static void bwd(const T* dout, const T* gu, T* dgu, int64_t N, int64_t H) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++)
#pragma omp simd
    for (int64_t j = 0; j < H; j++) {
      const float g = to_f32(gu[n * 2 * H + j]), u = to_f32(gu[n * 2 * H + H + j]), d = to_f32(dout[n * H + j]);
      const float s = 1.f / (1.f + cpu::exp_simd(-g));
      dgu[n * 2 * H + j] = from_f32<T>(d * u * s * (1.f + g * (1.f - s)));
      dgu[n * 2 * H + H + j] = from_f32<T>(d * g * s);
    }
}

void swiglu_fwd_cpu(const Tensor& gu, Tensor& out, const Tensor& out_scale) {
  const int64_t H = out.size(-1), N = out.numel() / H;
  const float inv_scale = out_scale.defined() ? 1.f / out_scale.data<float>()[0] : 1.f;
  ANVIL_DISPATCH_FLOAT(gu.dtype(), T, {
    ANVIL_DISPATCH_OUT(out.dtype(), T, TO, fwd<T, TO>(gu.data<T>(), out.data<TO>(), inv_scale, N, H));
  });
}

void swiglu_bwd_cpu(const Tensor& dout, const Tensor& gu, Tensor& dgu) {
  const int64_t H = dout.size(-1), N = dout.numel() / H;
  ANVIL_DISPATCH_FLOAT(gu.dtype(), T, bwd<T>(dout.data<T>(), gu.data<T>(), dgu.data<T>(), N, H));
}

}  // namespace anvil
