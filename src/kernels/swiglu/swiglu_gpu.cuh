// The SwiGLU activation on the GPU, shared by swiglu.cu and the skinny GEMM's fused x staging (skinny_gemm.cu),
// so the fused and unfused decode paths compute the same function.
#pragma once
#include "backends/gpu/common.cuh"

namespace anvil {

// At 6 bytes per element (bf16 forward) and ~4.8 TB/s, 132 SMs must finish an element in ~35 instructions;
// the IEEE expf and division take ~25 of them. For 16-bit T the hardware exp2 and the fast divide (~2 f32
// ulp, against the 2^-9 of the bf16 rounding that follows) cost ~6; f32 keeps the accurate versions.
// For g < -88, 1 + e^-g is inf and both forms give 0.
template <class T>
__device__ __forceinline__ float swiglu_sigmoid(float g) {
  if constexpr (sizeof(T) == sizeof(float)) return 1.f / (1.f + expf(-g));
  else return __fdividef(1.f, 1.f + __expf(-g));
}

// silu(g) * u in f32 for gate and up values stored as T.
template <class T>
__device__ __forceinline__ float swiglu_f32(float g, float u) {
  return g * swiglu_sigmoid<T>(g) * u;
}

}  // namespace anvil
