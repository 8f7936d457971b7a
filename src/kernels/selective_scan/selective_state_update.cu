// GPU selective_state_update: one decode step of the selective scan (see selective_scan.h).
// One warp per (b, d), lanes over the N states: the (B, D, N) f32 state is read and written coalesced, and y is
// a warp sum. Bytes per step: the state twice (N*8 per channel) dominate x, dt, z, out.
#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {

constexpr int kW = gpu::kWarpSize;
constexpr int kWarps = 4;              // channels per block
constexpr int kThreads = kWarps * kW;  // 128 or 256

__device__ __forceinline__ float softplus_f(float v) { return v > 20.f ? v : log1pf(expf(v)); }
__device__ __forceinline__ float sigmoid_f(float v) { return 1.f / (1.f + expf(-v)); }

template <class T>
__global__ void __launch_bounds__(kThreads) state_update_kernel(float* __restrict__ state, const T* __restrict__ x,
                                                                const T* __restrict__ dtp, const float* __restrict__ A,
                                                                const T* __restrict__ Bm, const T* __restrict__ Cm,
                                                                const float* __restrict__ D_skip,
                                                                const T* __restrict__ z,
                                                                const float* __restrict__ dt_bias, bool sp,
                                                                T* __restrict__ out, int64_t rows, int D, int N,
                                                                int G) {
  const int lane = int(threadIdx.x) % kW;
  const int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.x / kW;
  if (i >= rows) return;  // whole warps leave together
  const int d = int(i % D), b = int(i / D), g = d / (D / G);
  float step = to_f32(dtp[i]) + (dt_bias ? dt_bias[d] : 0.f);
  if (sp) step = softplus_f(step);
  const float xx = to_f32(x[i]);
  const T* Bv = Bm + (int64_t(b) * G + g) * N;
  const T* Cv = Cm + (int64_t(b) * G + g) * N;
  float y = 0.f;
  for (int n = lane; n < N; n += kW) {
    float& h = state[i * N + n];
    h = fmaf(expf(step * A[int64_t(d) * N + n]), h, step * to_f32(Bv[n]) * xx);
    y = fmaf(to_f32(Cv[n]), h, y);
  }
  y = gpu::warp_sum(y);
  if (lane == 0) {
    if (D_skip) y = fmaf(D_skip[d], xx, y);
    if (z) {
      const float zz = to_f32(z[i]);
      y *= zz * sigmoid_f(zz);
    }
    out[i] = from_f32<T>(y);
  }
}

template <class T>
const T* opt(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

}  // namespace

void selective_state_update_gpu(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                                const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                                bool dt_softplus, Tensor& out) {
  const int64_t rows = x.size(0) * x.size(1);
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    state_update_kernel<T><<<gpu::ceil_div(rows, kWarps), kThreads, 0, gpu::stream()>>>(
        state.data<float>(), x.data<T>(), dt.data<T>(), A.data<float>(), Bm.data<T>(), Cm.data<T>(),
        opt<float>(D_skip), opt<T>(z), opt<float>(dt_bias), dt_softplus, out.data<T>(), rows, int(x.size(1)),
        int(A.size(1)), int(Bm.size(1)));
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
