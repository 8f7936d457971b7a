// NVIDIA spellings. One of the two files (with hip.h) allowed to name the vendor runtime.
#pragma once
#include <cuda_runtime.h>

#include <string>

#define ANVIL_VENDOR_NAME "cuda"
// Warp width is a compile-time constant of the target; kernels never spell the number themselves.
#define ANVIL_WARP_SIZE 32
#define ANVIL_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)

// exp2 with subnormal inputs and results flushed to zero: one MUFU.EX2. exp2f (and __expf) under the default
// -ftz=false wrap it in a compare and two predicated multiplies: 3 more issue slots per exponential, and the
// selective scan computes D*N of them per token.
__device__ __forceinline__ float anvil_exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define ANVIL_EXP2_FTZ(x) anvil_exp2_ftz(x)


// Neutral spellings used by anvil's GPU sources; hip.h maps the same names onto HIP.
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuPeekAtLastError cudaPeekAtLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphDestroy cudaGraphDestroy
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define gpuMemGetInfo cudaMemGetInfo
#define gpuGraphInstantiate(exec, graph) cudaGraphInstantiate((exec), (graph), 0)

namespace anvil::gpu::vendor {
using stream_t = cudaStream_t;
using event_t = cudaEvent_t;
using graph_exec_t = cudaGraphExec_t;
using error_t = cudaError_t;
inline const char* error_string(error_t e) { return cudaGetErrorString(e); }
constexpr error_t success = cudaSuccess;
// Architecture name and capabilities: FP8 tensor-core arithmetic from sm_89 (Ada, Hopper).
template <class Info>
inline void fill_arch(const cudaDeviceProp& p, Info& info) {
  info.arch = "sm_" + std::to_string(p.major * 10 + p.minor);
  info.fp8_compute = p.major * 10 + p.minor >= 89;
  info.smem_per_block_optin = p.sharedMemPerBlockOptin;
  info.bf16_compute = p.major >= 8;
}
}  // namespace anvil::gpu::vendor

// Full-mask shuffles: the mask type is 32 bits on CUDA, 64 on HIP.
#define ANVIL_SHFL_XOR(v, lane_mask, width) __shfl_xor_sync(0xffffffffu, (v), (lane_mask), (width))
#define ANVIL_SHFL_UP(v, delta, width) __shfl_up_sync(0xffffffffu, (v), (delta), (width))
#define ANVIL_SHFL(v, src, width) __shfl_sync(0xffffffffu, (v), (src), (width))
