// Hardware rounding of f32 to bf16/f16 (and f16 to f32) for device code. core/dtype.h includes this in device
// compilation passes only, so its converters stay one set of functions for host and device. Software rounding
// costs 5 (bf16) to ~15 (f16) integer ops per value; in causal_conv1d's forward (4 FMAs per element) the
// conversions were a large part of an SM-bound kernel (85% compute throughput at 55% of copy bandwidth).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
#define ANVIL_HW_BF16_CVT 1
__device__ __forceinline__ uint16_t anvil_hw_f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));  // RNE; NaN becomes the canonical 0x7fff
  return h;
}
#endif
#define ANVIL_HW_F16_CVT 1
__device__ __forceinline__ uint16_t anvil_hw_f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));  // RNE, overflow to inf, subnormals exact
  return h;
}
__device__ __forceinline__ float anvil_hw_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
#elif defined(__HIP_DEVICE_COMPILE__)
// CDNA2 converts f16 in hardware (v_cvt_f16_f32, v_cvt_f32_f16); it has no bf16 conversion instruction.
#define ANVIL_HW_F16_CVT 1
__device__ __forceinline__ uint16_t anvil_hw_f32_to_f16(float f) { return __builtin_bit_cast(uint16_t, _Float16(f)); }
__device__ __forceinline__ float anvil_hw_f16_to_f32(uint16_t h) { return float(__builtin_bit_cast(_Float16, h)); }
#endif
