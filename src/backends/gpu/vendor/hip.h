// AMD spellings: maps anvil's neutral gpu* runtime names onto HIP (5.x API, so Debian's
// hipcc 5.2 compiles it). The other file (with cuda.h) allowed to name the vendor runtime.
#pragma once
#include <hip/hip_runtime.h>

#include <string>
#include <utility>

#define ANVIL_VENDOR_NAME "hip"
// CDNA (gfx90a, gfx942) runs 64-wide wavefronts. RDNA (wave32) would set 32 here.
#define ANVIL_WARP_SIZE 64
// HIP's second launch-bounds argument is the minimum waves per EU (SIMD; a CDNA CU has 4), not blocks per SM:
// translate, or the compiler caps registers 4x too hard (a 2x256 request spilled 772 registers on gfx90a).
#define ANVIL_LAUNCH_BOUNDS(threads, min_blocks) \
  __launch_bounds__(threads, ((min_blocks) * (threads) + 4 * ANVIL_WARP_SIZE - 1) / (4 * ANVIL_WARP_SIZE))
// exp2 where subnormals may be flushed (cuda.h: one MUFU.EX2). HIP 5.x has no portable cheaper spelling than
// exp2f, which lowers to v_exp_f32.
#define ANVIL_EXP2_FTZ(x) exp2f(x)
#define ANVIL_LOG2_FTZ(x) __log2f(x)  // v_log_f32

// x * y rounded on its own, never fused with an add that follows into one FMA (cuda.h: __fmul_rn). clang's
// HIP __fmul_rn is a plain `*`, and HIP compiles with -ffp-contract=fast-honor-pragmas: without the pragma
// `acc + anvil_mul_rn(a, b)` became a v_fmac_f32 (one rounding instead of two).
__device__ __forceinline__ float anvil_mul_rn(float x, float y) {
#pragma clang fp contract(off)
  return x * y;
}

// Early launch does not exist on HIP: see cuda.h.
__device__ __forceinline__ void anvil_wait_prior_grid() {}
__device__ __forceinline__ void anvil_allow_next_grid() {}

// *p += v in global memory, without a return value: nothing waits for the add to come back. (nvcc made
// every discarded atomicAdd of the ticketed selective-scan backward a returning ATOMG, where the plain kernel
// got REDG.)
__device__ __forceinline__ void anvil_red_add_f32(float* p, float v) { atomicAdd(p, v); }
// Ends the kernel with an error the host reports (a bounded wait that gave up).
__device__ __forceinline__ void anvil_trap() { __builtin_trap(); }
// One 16-byte store (global_store_dwordx4): clang's native 4-vector type never splits the way nvcc's uint4 did.
__device__ __forceinline__ void anvil_store16(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  *reinterpret_cast<u32x4*>(p) = u32x4{a, b, c, d};
}
// See cuda.h: a read-once, write-once stream, as nontemporal loads and stores.
__device__ __forceinline__ uint4 anvil_load16_once(const void* p) {
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  const u32x4 v = __builtin_nontemporal_load(reinterpret_cast<const u32x4*>(p));
  return make_uint4(v.x, v.y, v.z, v.w);
}
__device__ __forceinline__ void anvil_store16_once(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  __builtin_nontemporal_store(u32x4{a, b, c, d}, reinterpret_cast<u32x4*>(p));
}
__device__ __forceinline__ void anvil_store8_once(void* p, uint32_t a, uint32_t b) {
  typedef uint32_t u32x2 __attribute__((ext_vector_type(2)));
  __builtin_nontemporal_store(u32x2{a, b}, reinterpret_cast<u32x2*>(p));
}

// See cuda.h. On AMD, __threadfence() is an agent-scope seq_cst fence, which invalidates the CU's vector L1
// (buffer_wbinvl1_vol on gfx90a): a plain load after it sees what other blocks wrote before their fence.
__device__ __forceinline__ float anvil_load_l2(const float* p) { return *p; }
__device__ __forceinline__ float4 anvil_load_l2(const float4* p) { return *p; }

// 16-byte global -> shared copy (cuda.h: cp.async). HIP 5.x on CDNA has no asynchronous global->LDS copy that
// clang exposes portably, so this is a plain load and LDS store: the wavefront waits for the load here (the
// copy does not overlap compute as on NVIDIA) but holds no registers across the compute. commit/wait: no-ops.
// 0: the copy is synchronous, so a kernel may put its destination in memory that is free only at the copy.
#define ANVIL_ASYNC_SMEM_COPY 0
__device__ __forceinline__ void anvil_cp_async16(void* smem, const void* gmem, bool full) {
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  *reinterpret_cast<u32x4*>(smem) = full ? *reinterpret_cast<const u32x4*>(gmem) : u32x4{0, 0, 0, 0};
}
__device__ __forceinline__ void anvil_cp_async_commit() {}
__device__ __forceinline__ void anvil_cp_async_wait_all() {}

// No ANVIL_HAS_MMA16816 here (cuda.h: the warp-level m16n8k16 tensor-core product and its fragment layout). CDNA's
// MFMA (gfx90a: v_mfma_f32_16x16x16bf16_1k over a 64-wide wavefront) distributes its operands differently, so the
// kernels written against that layout (skinny_gemm's MMA path) are compiled out on AMD and their FMA kernels run.

// Neutral spellings used by anvil's GPU sources (cuda.h maps the same names onto CUDA).
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuPeekAtLastError hipPeekAtLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocHost hipHostMalloc
#define gpuFreeHost hipHostFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuStream_t hipStream_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphDestroy hipGraphDestroy
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define gpuMemGetInfo hipMemGetInfo
#define gpuGraphInstantiate(exec, graph) hipGraphInstantiate((exec), (graph), nullptr, nullptr, 0)

namespace anvil::gpu::vendor {
using stream_t = hipStream_t;
using event_t = hipEvent_t;
using graph_exec_t = hipGraphExec_t;
using error_t = hipError_t;
inline const char* error_string(error_t e) { return hipGetErrorString(e); }
constexpr error_t success = hipSuccess;
// Architecture name and capabilities: FP8 matrix arithmetic on gfx94x (MI300) and later.
template <class Info>
inline void fill_arch(const hipDeviceProp_t& p, Info& info) {
  info.arch = p.gcnArchName;
  info.fp8_compute = info.arch.rfind("gfx94", 0) == 0 || info.arch.rfind("gfx95", 0) == 0;
  info.smem_per_block_optin = p.sharedMemPerBlock;
  info.bf16_compute = true;
  info.early_launch = false;
  info.bulk_copy = false;
}

// No early launch on HIP: an ordinary launch (the kernel's wait/allow calls are no-ops).
template <class... KArgs, class... Args>
inline error_t launch_early(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, stream_t stream,
                            Args&&... args) {
  hipLaunchKernelGGL(kernel, grid, block, smem, stream, std::forward<Args>(args)...);
  return hipGetLastError();
}
}  // namespace anvil::gpu::vendor

#define ANVIL_SHFL_XOR(v, lane_mask, width) __shfl_xor((v), (lane_mask), (width))
#define ANVIL_SHFL_UP(v, delta, width) __shfl_up((v), (delta), (width))
#define ANVIL_SHFL(v, src, width) __shfl((v), (src), (width))
