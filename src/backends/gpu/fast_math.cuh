// Per-element nonlinearities of the Mamba kernels (causal_conv1d, selective_scan), one definition for both.
// 16-bit I/O takes the MUFU approximations (~1e-7 relative error, far below the dtype's 4e-3) through the
// flush-to-zero spellings: __expf / __logf under -ftz=false wrap each MUFU op in a range test and two predicated
// multiplies (SASS, sm_90: 3 of the ~12 instructions of a SiLU output; the conv kernels issued on 75-86% of
// cycles by ncu). f32 keeps the accurate library functions.
#pragma once
#include "backends/gpu/common.cuh"

namespace anvil::gpu {

constexpr float kFastLog2e = 1.4426950408889634f;
constexpr float kFastLn2 = 0.6931471805599453f;

template <class T>
__device__ __forceinline__ float sigmoid_t(float v) {
  if constexpr (sizeof(T) == 2) return __fdividef(1.f, 1.f + ANVIL_EXP2_FTZ(v * -kFastLog2e));
  else return 1.f / (1.f + expf(-v));
}
template <class T>
__device__ __forceinline__ float silu_t(float v) {
  if constexpr (sizeof(T) == 2) return __fdividef(v, 1.f + ANVIL_EXP2_FTZ(v * -kFastLog2e));
  else return v / (1.f + expf(-v));
}
// log(1 + e^v), v itself above 20 (where the two agree in f32).
template <class T>
__device__ __forceinline__ float softplus_t(float v) {
  if constexpr (sizeof(T) == 2) return v > 20.f ? v : kFastLn2 * ANVIL_LOG2_FTZ(1.f + ANVIL_EXP2_FTZ(v * kFastLog2e));
  else return v > 20.f ? v : log1pf(expf(v));
}

}  // namespace anvil::gpu
