// GPU FP8 quantisation: per-token (one block per row: amax, then quantise; the second read of the row hits L1/L2,
// so HBM sees each byte once), per-tensor and dequantise (element-wise, grid-stride). Groups of 8 elements: one
// 16-byte load of 16-bit x (two for f32) and one 8-byte store of codes, when sizes and pointers allow it.
// The codecs are fp8_e4m3.h's, shared with the CPU path, so both backends give the same bytes.
#include <algorithm>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/quantize/fp8_e4m3.h"
#include "kernels/quantize/quantize.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;  // 8 warps of 32 or 4 wavefronts of 64
constexpr int kGroup = 8;      // elements per vector step

// 8 consecutive elements as f32 (p 16-byte aligned).
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&v)[kGroup]) {
  constexpr int P = gpu::Pack<T>::N;  // 4 (f32) or 8 (16-bit)
#pragma unroll
  for (int h = 0; h < kGroup / P; h++) {
    const auto pk = gpu::load_pack(p + h * P);
#pragma unroll
    for (int i = 0; i < P; i++) v[h * P + i] = to_f32(pk.v[i]);
  }
}
template <class T>
__device__ __forceinline__ void store8(T* p, const float (&v)[kGroup]) {
  constexpr int P = gpu::Pack<T>::N;
#pragma unroll
  for (int h = 0; h < kGroup / P; h++) {
    gpu::Pack<T> pk;
#pragma unroll
    for (int i = 0; i < P; i++) pk.v[i] = from_f32<T>(v[h * P + i]);
    gpu::store_pack(p + h * P, pk);
  }
}
// 8 codes of v * r into one 8-byte store (q 8-byte aligned).
__device__ __forceinline__ void encode8(uint8_t* q, const float (&v)[kGroup], float r, bool fnuz) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < kGroup; i++) w[i / 4] |= uint32_t(e4m3_encode(v[i] * r, fnuz)) << (8 * (i % 4));
  *reinterpret_cast<uint2*>(q) = make_uint2(w[0], w[1]);
}

// Row blockIdx.x of x (M, K): scale = max(amax / fmax, 2^-126), q = fp8(x * (1 / scale)).
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) per_token_kernel(const T* __restrict__ x, uint8_t* __restrict__ q,
                                                               float* __restrict__ scale, int64_t K, float fmax,
                                                               bool fnuz) {
  __shared__ float scratch[kThreads];
  const T* xr = x + int64_t(blockIdx.x) * K;
  uint8_t* qr = q + int64_t(blockIdx.x) * K;
  float amax = 0.f;  // fmaxf skips NaN, as the CPU path's std::fmax
  if constexpr (VEC) {
    for (int64_t c = int64_t(threadIdx.x) * kGroup; c < K; c += kThreads * kGroup) {
      float v[kGroup];
      load8(xr + c, v);
#pragma unroll
      for (int i = 0; i < kGroup; i++) amax = fmaxf(amax, fabsf(v[i]));
    }
  } else {
    for (int64_t c = threadIdx.x; c < K; c += kThreads) amax = fmaxf(amax, fabsf(to_f32(xr[c])));
  }
  amax = gpu::block_max(amax, scratch);
  const float s = fmaxf(amax / fmax, kFp8MinScale), r = 1.f / s;
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  if constexpr (VEC) {
    for (int64_t c = int64_t(threadIdx.x) * kGroup; c < K; c += kThreads * kGroup) {
      float v[kGroup];
      load8(xr + c, v);
      encode8(qr + c, v, r, fnuz);
    }
  } else {
    for (int64_t c = threadIdx.x; c < K; c += kThreads) qr[c] = e4m3_encode(to_f32(xr[c]) * r, fnuz);
  }
}

// q[i] = fp8(x[i] * (1 / scale[0])) over n elements (n % 8 == 0 when VEC).
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) per_tensor_kernel(const T* __restrict__ x, uint8_t* __restrict__ q,
                                                                const float* __restrict__ scale, int64_t n,
                                                                bool fnuz) {
  const float r = 1.f / scale[0];
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  if constexpr (VEC) {
    for (int64_t g = int64_t(blockIdx.x) * kThreads + threadIdx.x; g < n / kGroup; g += stride) {
      float v[kGroup];
      load8(x + g * kGroup, v);
      encode8(q + g * kGroup, v, r, fnuz);
    }
  } else {
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
      q[i] = e4m3_encode(to_f32(x[i]) * r, fnuz);
  }
}

// y (M, K) = decode(q) * scale[row * scale_stride] (K % 8 == 0 when VEC, so a group never straddles two rows).
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) dequant_kernel(const uint8_t* __restrict__ q,
                                                             const float* __restrict__ scale, int scale_stride,
                                                             T* __restrict__ y, int64_t n, int64_t K, bool fnuz) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  if constexpr (VEC) {
    for (int64_t g = int64_t(blockIdx.x) * kThreads + threadIdx.x; g < n / kGroup; g += stride) {
      const int64_t i = g * kGroup;
      const float s = scale[(i / K) * scale_stride];
      const uint2 w = *reinterpret_cast<const uint2*>(q + i);
      float v[kGroup];
#pragma unroll
      for (int j = 0; j < kGroup; j++) v[j] = e4m3_decode(uint8_t(((j < 4 ? w.x : w.y) >> (8 * (j % 4))) & 0xffu), fnuz) * s;
      store8(y + i, v);
    }
  } else {
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
      y[i] = from_f32<T>(e4m3_decode(q[i], fnuz) * scale[(i / K) * scale_stride]);
  }
}

bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; }

// Grid-stride launches: at most 8 blocks per SM/CU, enough to cover the device's memory latency.
int stride_blocks(int64_t work) {
  const int cu = gpu::device_info(gpu::current_device()).compute_units;
  return int(std::max<int64_t>(1, std::min<int64_t>(gpu::ceil_div(work, kThreads), int64_t(cu) * 8)));
}

}  // namespace

void quantize_fp8_per_token_gpu(const Tensor& x, Tensor& q, Tensor& scale) {
  const int64_t M = x.size(0), K = x.size(1);
  if (M == 0) return;
  const bool fnuz = q.dtype() == DType::e4m3fnuz;
  uint8_t* qp = static_cast<uint8_t*>(q.data_ptr());
  const bool vec = K % kGroup == 0 && gpu::aligned16(x.data_ptr()) && aligned8(qp);
  ANVIL_CHECK(M <= INT32_MAX, "quantize_fp8_per_token", "fewer than 2^31 rows", M);
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    if (vec)
      per_token_kernel<T, true><<<unsigned(M), kThreads, 0, gpu::stream()>>>(x.data<T>(), qp, scale.data<float>(), K,
                                                                             fp8_max(q.dtype()), fnuz);
    else
      per_token_kernel<T, false><<<unsigned(M), kThreads, 0, gpu::stream()>>>(x.data<T>(), qp, scale.data<float>(), K,
                                                                              fp8_max(q.dtype()), fnuz);
    ANVIL_LAUNCH_CHECK();
  });
}

void quantize_fp8_per_tensor_gpu(const Tensor& x, const Tensor& scale, Tensor& q) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool fnuz = q.dtype() == DType::e4m3fnuz;
  uint8_t* qp = static_cast<uint8_t*>(q.data_ptr());
  const bool vec = n % kGroup == 0 && gpu::aligned16(x.data_ptr()) && aligned8(qp);
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    if (vec)
      per_tensor_kernel<T, true><<<stride_blocks(n / kGroup), kThreads, 0, gpu::stream()>>>(
          x.data<T>(), qp, scale.data<float>(), n, fnuz);
    else
      per_tensor_kernel<T, false><<<stride_blocks(n), kThreads, 0, gpu::stream()>>>(x.data<T>(), qp,
                                                                                    scale.data<float>(), n, fnuz);
    ANVIL_LAUNCH_CHECK();
  });
}

void dequantize_fp8_gpu(const Tensor& q, const Tensor& scale, Tensor& y) {
  const int64_t M = q.size(0), K = q.size(1), n = q.numel();
  if (n == 0) return;
  const bool fnuz = q.dtype() == DType::e4m3fnuz;
  const int stride = scale.numel() == M && M > 1 ? 1 : 0;
  const uint8_t* qp = static_cast<const uint8_t*>(q.data_ptr());
  const bool vec = K % kGroup == 0 && aligned8(qp) && gpu::aligned16(y.data_ptr());
  ANVIL_DISPATCH_FLOAT(y.dtype(), T, {
    if (vec)
      dequant_kernel<T, true><<<stride_blocks(n / kGroup), kThreads, 0, gpu::stream()>>>(
          qp, scale.data<float>(), stride, y.data<T>(), n, K, fnuz);
    else
      dequant_kernel<T, false><<<stride_blocks(n), kThreads, 0, gpu::stream()>>>(qp, scale.data<float>(), stride,
                                                                                y.data<T>(), n, K, fnuz);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
