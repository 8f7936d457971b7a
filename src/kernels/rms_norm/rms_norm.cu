// GPU rms_norm, forward and backward. One block per row; 16-byte loads when the row allows it.
// The row (C <= 16384 bf16 = 32 KB) is read twice: the second read hits L1/L2, so HBM sees each byte once.
#include <algorithm>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rms_norm/rms_norm.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;  // 8 warps of 32 or 4 wavefronts of 64

// Sum over a row of f(value) with packed loads when VEC, scalar otherwise.
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) rms_norm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                  float eps, T* __restrict__ y,
                                                                  float* __restrict__ rstd, int C) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * C;
  T* yr = y + row * C;
  float ss = 0.f;
  if constexpr (VEC) {
    constexpr int P = gpu::Pack<T>::N;
    for (int c = threadIdx.x * P; c < C; c += kThreads * P) {
      auto p = gpu::load_pack(xr + c);
#pragma unroll
      for (int i = 0; i < P; i++) {
        float v = to_f32(p.v[i]);
        ss += v * v;
      }
    }
  } else {
    for (int c = threadIdx.x; c < C; c += kThreads) {
      float v = to_f32(xr[c]);
      ss += v * v;
    }
  }
  ss = gpu::block_sum(ss, scratch);
  const float r = rsqrtf(ss / float(C) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  if constexpr (VEC) {
    constexpr int P = gpu::Pack<T>::N;
    for (int c = threadIdx.x * P; c < C; c += kThreads * P) {
      auto p = gpu::load_pack(xr + c);
      auto q = gpu::load_pack(w + c);
      gpu::Pack<T> o;
#pragma unroll
      for (int i = 0; i < P; i++) o.v[i] = from_f32<T>(to_f32(p.v[i]) * r * to_f32(q.v[i]));
      gpu::store_pack(yr + c, o);
    }
  } else {
    for (int c = threadIdx.x; c < C; c += kThreads) yr[c] = from_f32<T>(to_f32(xr[c]) * r * to_f32(w[c]));
  }
}

// Backward: blocks stride over rows; each block keeps its partial dw in its own row of `dw_part` (G, C),
// touched only by the thread that owns that column (L2-resident), then matmul_dbias_gpu sums the G rows.
template <class T>
__global__ void __launch_bounds__(kThreads) rms_norm_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                                  const T* __restrict__ w,
                                                                  const float* __restrict__ rstd, T* __restrict__ dx,
                                                                  float* __restrict__ dw_part, int64_t N, int C) {
  __shared__ float scratch[kThreads];
  float* part = dw_part + int64_t(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += kThreads) part[c] = 0.f;
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* dyr = dy + row * C;
    const T* xr = x + row * C;
    const float r = rstd[row];
    float dot = 0.f;
    for (int c = threadIdx.x; c < C; c += kThreads) dot += to_f32(dyr[c]) * to_f32(w[c]) * to_f32(xr[c]);
    dot = gpu::block_sum(dot, scratch) * r / float(C);
    for (int c = threadIdx.x; c < C; c += kThreads) {
      const float g = to_f32(dyr[c]), xhat = to_f32(xr[c]) * r;
      dx[row * C + c] = from_f32<T>(r * (g * to_f32(w[c]) - xhat * dot));
      part[c] += g * xhat;
    }
  }
}

}  // namespace

void rms_norm_fwd_gpu(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd) {
  const int C = int(x.size(-1));
  const int64_t N = x.numel() / C;
  if (N == 0) return;
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    const bool vec = C % gpu::Pack<T>::N == 0 && gpu::aligned16(x.data_ptr()) && gpu::aligned16(w.data_ptr()) &&
                     gpu::aligned16(y.data_ptr());
    auto kernel = vec ? rms_norm_fwd_kernel<T, true> : rms_norm_fwd_kernel<T, false>;
    kernel<<<unsigned(N), kThreads, 0, gpu::stream()>>>(x.data<T>(), w.data<T>(), eps, y.data<T>(),
                                                        rstd.data<float>(), C);
    ANVIL_LAUNCH_CHECK();
  });
}

void rms_norm_bwd_gpu(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw) {
  const int C = int(x.size(-1));
  const int64_t N = x.numel() / C;
  if (N == 0) return;
  const int sms = gpu::device_info(gpu::current_device()).compute_units;
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    // Every resident block at once (a block has one row in flight; see add_rms_norm_bwd_gpu).
    int per_sm = 0;
    ANVIL_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rms_norm_bwd_kernel<T>, kThreads, 0));
    const int G = int(std::min<int64_t>(N, int64_t(std::max(per_sm, 1)) * sms));
    Tensor part = Tensor::empty({G, C}, DType::f32, x.device());
    rms_norm_bwd_kernel<T><<<G, kThreads, 0, gpu::stream()>>>(dy.data<T>(), x.data<T>(), w.data<T>(),
                                                              rstd.data<float>(), dx.data<T>(), part.data<float>(), N, C);
    ANVIL_LAUNCH_CHECK();
    matmul_dbias_gpu(part, dw);  // dw += column sums of the G partial rows (two passes, deterministic)
  });
}

}  // namespace anvil
