// The one header every GPU kernel includes. It picks the vendor spellings, checks every runtime call, and
// provides warp/block reductions templated on the warp width (32 on NVIDIA, 64 on AMD CDNA).
#pragma once
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "backends/gpu/vendor/select.h"
#include "backends/gpu/runtime.h"
#include "core/dtype.h"
#include "core/error.h"

namespace anvil::gpu {

constexpr int kWarpSize = ANVIL_WARP_SIZE;

// The bound of every spin wait on another block (weight rings, grid barriers, the scan backward's segment flags):
// 2e10 clock64 cycles, ~10 s at the H200's 1.98 GHz. Past it the waiter reports where it waited and traps, and
// the launch fails with an error the host reports: a schedule bug is an error, not a hung process.
constexpr long long kWaitCycles = 20'000'000'000LL;

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
// Both move 32-bit words built by shifts. A plain struct copy of Pack<bf16> compiled (nvcc 13, sm_90) to one
// LDG.128 for the load but to 2-byte stores, and a uint4 assignment to 4-byte ones: in causal_conv1d those
// partial-sector writes kept the L2 89% busy with DRAM at 25% (35% of copy). The store is the vendor's
// anvil_store16, which cannot be split.
template <class T>
__device__ __forceinline__ uint32_t raw_bits(T x) {
  if constexpr (std::is_same_v<T, float>) return __float_as_uint(x);
  else if constexpr (std::is_integral_v<T>) return uint32_t(x);  // packs of raw words (skinny_gemm's weights)
  else return x.bits;                                            // bf16, f16, fp8 structs
}
template <class T>
__device__ __forceinline__ T from_raw_bits(uint32_t b) {
  if constexpr (std::is_same_v<T, float>) return __uint_as_float(b);
  else if constexpr (std::is_integral_v<T>) return T(b);
  else { T x; x.bits = decltype(x.bits)(b); return x; }
}
// A pack's 16 bytes as loaded, split into elements. Loads kept in flight across a loop should stay uint4 (4
// registers) and be unpacked where they are used: ptxas places the split of a Pack<T> load (one register per
// 16-bit element) right behind the load, which then waits for memory before the loop starts.
template <class T>
__device__ __forceinline__ Pack<T> unpack(const uint4 u) {
  static_assert(sizeof(Pack<T>) == sizeof(uint4), "a pack is 16 bytes");
  constexpr int per = 4 / sizeof(T), bits = 8 * sizeof(T);  // elements per 32-bit word, bits per element
  constexpr uint32_t mask = 0xffffffffu >> (32 - bits);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  Pack<T> v;
#pragma unroll
  for (int i = 0; i < Pack<T>::N; i++) v.v[i] = from_raw_bits<T>((w[i / per] >> (bits * (i % per))) & mask);
  return v;
}
template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return unpack<T>(*reinterpret_cast<const uint4*>(p));
}
// The inverse of unpack: a pack's elements as its 16 bytes.
template <class T>
__device__ __forceinline__ uint4 pack_bits(const Pack<T>& v) {
  constexpr int per = 4 / sizeof(T), bits = 8 * sizeof(T);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < Pack<T>::N; i++) w[i / per] |= raw_bits(v.v[i]) << (bits * (i % per));
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  const uint4 w = pack_bits(v);
  anvil_store16(p, w.x, w.y, w.z, w.w);
}
// A launch that may start while the previous kernel on the stream is still running, where the device can
// (DeviceInfo::early_launch) and ANVIL_EARLY_LAUNCH is not 0: the kernel issues loads that depend on nothing
// (weights) and then calls anvil_wait_prior_grid() before touching its inputs and outputs. A decode step is ~320
// short kernels; the skinny GEMMs' weight stream then starts under the previous kernel's tail.
inline bool early_launch_enabled() {
  static const bool env = [] {
    const char* e = std::getenv("ANVIL_EARLY_LAUNCH");
    return !(e && e[0] == '0');
  }();
  return env && device_info(current_device()).early_launch;
}
template <class... KArgs, class... Args>
inline void launch_early(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  if (early_launch_enabled()) {
    ANVIL_GPU_CHECK(vendor::launch_early(kernel, grid, block, smem, stream(), std::forward<Args>(args)...));
  } else {
    kernel<<<grid, block, smem, stream()>>>(std::forward<Args>(args)...);
    ANVIL_LAUNCH_CHECK();
  }
}
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
}  // namespace anvil::gpu
