// The one header every GPU kernel includes. It picks the vendor spellings, checks every runtime call, and
// provides warp/block reductions templated on the warp width (32 on NVIDIA, 64 on AMD CDNA).
#pragma once
#include "backends/gpu/vendor/select.h"
#include "backends/gpu/runtime.h"
#include "core/dtype.h"
#include "core/error.h"

namespace anvil::gpu {

constexpr int kWarpSize = ANVIL_WARP_SIZE;

[[noreturn]] void throw_gpu_error(const char* call, gpuError_t e, const char* file, int line);

inline vendor::stream_t stream() { return static_cast<vendor::stream_t>(current_stream()); }

// Sum over the `Width` lanes of a warp (butterfly: every lane ends with the total).
template <int Width = kWarpSize>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = Width / 2; o > 0; o >>= 1) v += ANVIL_SHFL_XOR(v, o, Width);
  return v;
}
template <int Width = kWarpSize>
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = Width / 2; o > 0; o >>= 1) v = fmaxf(v, ANVIL_SHFL_XOR(v, o, Width));
  return v;
}
// Block-wide sum; every thread gets the result. `scratch` holds kWarpSize floats in shared memory.
template <int Width = kWarpSize>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % Width, warp = threadIdx.x / Width, nwarps = (blockDim.x + Width - 1) / Width;
  v = warp_sum<Width>(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.f;
  return warp_sum<Width>(v);
}
template <int Width = kWarpSize>
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % Width, warp = threadIdx.x / Width, nwarps = (blockDim.x + Width - 1) / Width;
  v = warp_max<Width>(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : -INFINITY;
  return warp_max<Width>(v);
}

inline int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

}  // namespace anvil::gpu

// Every runtime call is checked; the error names the call, the vendor message, and file:line.
#define ANVIL_GPU_CHECK(call)                                                            \
  do {                                                                                   \
    gpuError_t anvil_err_ = (call);                                                     \
    if (anvil_err_ != gpuSuccess) ::anvil::gpu::throw_gpu_error(#call, anvil_err_, __FILE__, __LINE__); \
  } while (0)
// After every launch: catches bad configurations at once (async faults surface at the next sync).
#define ANVIL_LAUNCH_CHECK() ANVIL_GPU_CHECK(gpuGetLastError())

namespace anvil::gpu {
// 16 bytes of T: the unit of every vectorised global load/store (one LDG.128 per thread).
template <class T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};
template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) { return *reinterpret_cast<const Pack<T>*>(p); }
template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) { *reinterpret_cast<Pack<T>*>(p) = v; }
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
}  // namespace anvil::gpu
