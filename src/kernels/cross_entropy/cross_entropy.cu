// GPU row-wise pieces of the chunked cross-entropy (the chunk GEMMs go through anvil::matmul).
// One warp per row of the (N, Vc) f32 chunk, 16-byte loads when Vc allows: a chunk row is a few KB
// (Vc = 2048 at N = 32768), so a block per row spent its time in two block reductions and their barriers — on
// the H200, Mamba-130m's 99 chunks of 512 columns ran the forward at ~0.85 TB/s (75 µs for 64 MB). A warp
// reduces with shuffles only, and 8 rows per block keep 8 rows of loads in flight.
#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;  // 8 warps of 32 or 4 wavefronts of 64
constexpr int kW = gpu::kWarpSize;
constexpr int kRows = kThreads / kW;  // rows per block

// Merges x into a running (max, sum of exp(. - max)).
__device__ __forceinline__ void online_add(float x, float& m, float& s) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else {
    s += expf(x - m);
  }
}

// Calls f(j, value) for the row's elements this lane owns: float4 j = 4 * (lane + k * kW) when VEC.
template <bool VEC, class F>
__device__ __forceinline__ void for_lane(const float* zr, int Vc, int lane, F&& f) {
  if constexpr (VEC) {
    for (int j = 4 * lane; j < Vc; j += 4 * kW) {
      const float4 v = *reinterpret_cast<const float4*>(zr + j);
      f(j, v.x), f(j + 1, v.y), f(j + 2, v.z), f(j + 3, v.w);
    }
  } else {
    for (int j = lane; j < Vc; j += kW) f(j, zr[j]);
  }
}

// Online lse of the chunk row merged into the running (m, s); picks the target logit if it lies here.
template <bool VEC>
__global__ void __launch_bounds__(kThreads) ce_chunk_fwd_kernel(const float* __restrict__ z,
                                                                 const int32_t* __restrict__ targets, int64_t v0,
                                                                 bool first, float* __restrict__ m,
                                                                 float* __restrict__ s, float* __restrict__ tgt,
                                                                 int64_t N, int Vc) {
  const int lane = int(threadIdx.x) % kW;
  const int64_t n = int64_t(blockIdx.x) * kRows + threadIdx.x / kW;
  if (n >= N) return;
  const float* zr = z + n * Vc;
  float tm = -INFINITY, ts = 0.f;  // this lane's running max and sum over its columns
  for_lane<VEC>(zr, Vc, lane, [&](int, float x) { online_add(x, tm, ts); });
  const float M = gpu::warp_max(tm);
  const float S = gpu::warp_sum(tm == -INFINITY ? 0.f : ts * expf(tm - M));  // a lane without columns adds 0
  if (lane == 0) {
    if (first) {
      m[n] = M;
      s[n] = S;
      tgt[n] = 0.f;
    } else {
      const float Mn = fmaxf(m[n], M);
      s[n] = s[n] * expf(m[n] - Mn) + S * expf(M - Mn);
      m[n] = Mn;
    }
    const int t = targets[n];
    if (t >= v0 && t < v0 + Vc) tgt[n] = zr[t - v0];
  }
}

__global__ void ce_finish_kernel(const float* __restrict__ m, const float* __restrict__ s,
                                 const float* __restrict__ tgt, const int32_t* __restrict__ targets,
                                 float* __restrict__ loss, float* __restrict__ lse, int64_t N) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float l = m[n] + logf(s[n]);
  lse[n] = l;
  loss[n] = targets[n] < 0 ? 0.f : l - tgt[n];
}

// dz = dloss * (exp(z - lse) - onehot), zero on ignored rows; in place when T is float (each element is read
// by the lane that writes it).
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) ce_chunk_bwd_kernel(const float* z, const int32_t* __restrict__ targets,
                                                                 int64_t v0, const float* __restrict__ lse,
                                                                 const float* __restrict__ dloss, T* dz, int64_t N,
                                                                 int Vc) {
  const int lane = int(threadIdx.x) % kW;
  const int64_t n = int64_t(blockIdx.x) * kRows + threadIdx.x / kW;
  if (n >= N) return;
  const int t = targets[n];
  const float g = t < 0 ? 0.f : dloss[n], l = lse[n];
  const int64_t tj = int64_t(t) - v0;  // the target's column in this chunk (outside [0, Vc): none)
  T* dr = dz + n * Vc;
  for_lane<VEC>(z + n * Vc, Vc, lane, [&](int j, float x) { dr[j] = from_f32<T>(g * (expf(x - l) - (j == tj ? 1.f : 0.f))); });
}

template <class T>
__global__ void ce_cast_kernel(const float* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(x[i]);
}

}  // namespace

void cross_entropy_chunk_fwd_gpu(const Tensor& logits, const Tensor& targets, int64_t v0, bool first, Tensor& m,
                                 Tensor& s, Tensor& tgt) {
  const int64_t N = logits.size(0);
  const int Vc = int(logits.size(1));
  if (N == 0) return;
  const bool vec = Vc % 4 == 0 && gpu::aligned16(logits.data_ptr());
  auto kernel = vec ? ce_chunk_fwd_kernel<true> : ce_chunk_fwd_kernel<false>;
  kernel<<<gpu::ceil_div(N, kRows), kThreads, 0, gpu::stream()>>>(logits.data<float>(), targets.data<int32_t>(), v0,
                                                                  first, m.data<float>(), s.data<float>(),
                                                                  tgt.data<float>(), N, Vc);
  ANVIL_LAUNCH_CHECK();
}

void cross_entropy_finish_gpu(const Tensor& m, const Tensor& s, const Tensor& tgt, const Tensor& targets,
                              Tensor& loss, Tensor& lse) {
  const int64_t N = m.size(0);
  ce_finish_kernel<<<gpu::ceil_div(N, 256), 256, 0, gpu::stream()>>>(m.data<float>(), s.data<float>(),
                                                                     tgt.data<float>(), targets.data<int32_t>(),
                                                                     loss.data<float>(), lse.data<float>(), N);
  ANVIL_LAUNCH_CHECK();
}

void cross_entropy_chunk_bwd_gpu(const Tensor& logits, const Tensor& targets, int64_t v0, const Tensor& lse,
                                 const Tensor& dloss, Tensor& dlogits) {
  const int64_t N = logits.size(0);
  const int Vc = int(logits.size(1));
  if (N == 0) return;
  const bool vec = Vc % 4 == 0 && gpu::aligned16(logits.data_ptr());
  ANVIL_DISPATCH_FLOAT(dlogits.dtype(), T, {
    auto kernel = vec ? ce_chunk_bwd_kernel<T, true> : ce_chunk_bwd_kernel<T, false>;
    kernel<<<gpu::ceil_div(N, kRows), kThreads, 0, gpu::stream()>>>(logits.data<float>(), targets.data<int32_t>(), v0,
                                                                    lse.data<float>(), dloss.data<float>(),
                                                                    dlogits.data<T>(), N, Vc);
    ANVIL_LAUNCH_CHECK();
  });
}

void cross_entropy_cast_gpu(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  const int blocks = int(std::min<int64_t>(gpu::ceil_div(n, 256), 8 * 1024));
  ANVIL_DISPATCH_FLOAT(dst.dtype(), T, {
    ce_cast_kernel<T><<<blocks, 256, 0, gpu::stream()>>>(src.data<float>(), dst.data<T>(), n);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
