// The portable tiled GEMM (matmul_tiled.cu): the whole GEMM path on AMD, the fallback on NVIDIA.
// Host-side contract only (plain C++); the launcher picks the tile and the template instance.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace anvil {

// c (M, N) row-major, ldc = N:
//   c[m][n] = alpha * scale_a[m * scale_m_stride] * scale_n[n * scale_n_stride] * sum_k A(m, k) * B(k, n)
//             + beta * c[m][n]
// with A(m, k) = a[m * sam + k * sak] and B(k, n) = b[k * sbk + n * sbn] (element strides: every transpose is
// a choice of strides). scale_a / scale_n are f32 device pointers or null (= 1); they carry FP8 scales.
// beta == 0 never reads c.
struct TiledGemm {
  const void* a = nullptr;
  DType a_dtype = DType::f32;  // f32 / bf16 / f16, or an fp8 dtype (decoded through a 256-entry table)
  int64_t sam = 0, sak = 0;
  const void* b = nullptr;
  DType b_dtype = DType::f32;
  int64_t sbk = 0, sbn = 0;
  void* c = nullptr;
  DType c_dtype = DType::f32;  // f32, or a's dtype (bf16 for fp8 operands)
  int M = 0, N = 0, K = 0;
  float alpha = 1.f, beta = 0.f;
  const float* scale_a = nullptr;
  const float* scale_n = nullptr;
  int scale_m_stride = 0;  // 1: per output row (per-token activation scales), 0: one value
  int scale_n_stride = 0;  // 1: per output column, 0: one value
  // Strided batch (grid z): product i reads a + i * bsa, b + i * bsb and writes c + i * bsc (elements).
  int64_t batch = 1;
  int64_t bsa = 0, bsb = 0, bsc = 0;
};

// Supported (a, b, c) dtypes: (T, T, T) and (T, T, f32) for T in f32/bf16/f16; (fp8, fp8, bf16/f32) and
// weight-only (bf16, fp8, bf16/f32). Launches on gpu::stream(); throws anvil::Error on other combinations.
void matmul_tiled(const TiledGemm& p);

}  // namespace anvil
