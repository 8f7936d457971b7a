// A vendor GEMM library behind a neutral interface: cuBLASLt on NVIDIA (cuda_blaslt.cu); nothing on AMD yet
// (hip_blas.cu: Debian ships no hipBLAS/hipBLASLt), where the portable tiled kernel does the work.
// Plain C++: kernels include this without seeing any vendor header.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace anvil::gpu {

// Row-major c (M, N) = alpha * scale_a[m] * scale_b[n] * op(a) @ op(b) + beta * c, on the current stream.
// a is (M, K), or (K, M) with trans_a; b is (K, N), or (N, K) with trans_b; all contiguous, ldc = N.
struct VendorGemm {
  int64_t M = 0, N = 0, K = 0;
  const void* a = nullptr;
  DType a_dtype = DType::f32;
  bool trans_a = false;
  const void* b = nullptr;
  DType b_dtype = DType::f32;
  bool trans_b = false;
  void* c = nullptr;
  DType c_dtype = DType::f32;
  float alpha = 1.f, beta = 0.f;
  // Strided batch: `batch` products, operand i at its pointer + i * stride elements (stride 0: shared by all).
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // FP8 only: f32 device pointers; scale_a holds M values when per_row_a, else one; scale_b N values when
  // per_channel_b, else one.
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  bool per_row_a = false;
  bool per_channel_b = false;
};

// Runs the product and returns true; returns false, with c untouched, when no vendor library is built in or
// it does not support this case (dtypes, layout, alignment, device), so the caller runs the portable kernel.
// Library failures on a supported case throw anvil::Error with the status and file:line.
bool vendor_gemm(const VendorGemm& g);

}  // namespace anvil::gpu
