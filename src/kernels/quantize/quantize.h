// quantize: FP8 quantisation of activations (or weights) with f32 scales, and its inverse.
//
// Shapes:  x, q, y: (..., K), leading dimensions flattened to M rows (M = B*T tokens); row scales (M) f32;
//          a per-tensor scale is (1) f32.
// Dtypes:  x, y in f32/bf16/f16; q in e4m3fn (OCP, max 448) or e4m3fnuz (AMD, max 240).
// Numerics: per token (dynamic): scale[m] = amax_k |x[m][k]| / fp8_max (NaN elements ignored by the max), raised
//          to at least 2^-126 (the smallest normal f32, so 1/scale is finite and an all-zero row quantises to 0);
//          per tensor (static): the caller's scale[0] (> 0).
//          q = fp8(x * (1 / scale)): the reciprocal is rounded to f32 once per row (as vLLM's kernels do, instead
//          of a division per element), the product to f32, then to fp8 with round-to-nearest-even, saturating at
//          +-fp8_max (inf included); NaN stays NaN. fnuz has no negative zero.
//          Dequantise: y = f32(q) * scale (scale (1) or (M) rows), rounded once into y's dtype.
//          CPU and GPU compute the same f32 operations, so they agree bit for bit.
#pragma once
#include "core/tensor.h"

namespace anvil {

// The floor of a dynamic scale: the smallest normal f32 (see Numerics).
constexpr float kFp8MinScale = 0x1p-126f;

// Front-ends: check every argument, then run on x's (q's) device.
void quantize_fp8_per_token(const Tensor& x, Tensor& q, Tensor& scale);
void quantize_fp8_per_tensor(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& y);

// fp64 references (the spec), on M rows of K values. q receives the fp8 values decoded to double.
// fp8_round_ref: v rounded to the nearest value of fp8 dtype t, ties to even, saturating at +-fp8_max(t).
double fp8_round_ref(double v, DType t);
void quantize_fp8_per_token_ref(const double* x, double* q, double* scale, int64_t M, int64_t K, DType q_dtype);
void quantize_fp8_per_tensor_ref(const double* x, double scale, double* q, int64_t n, DType q_dtype);
// scale has M entries when per_row, else one.
void dequantize_fp8_ref(const double* q, const double* scale, bool per_row, double* y, int64_t M, int64_t K);

// Backends (arguments already checked; x, q, y viewed as (M, K)).
void quantize_fp8_per_token_cpu(const Tensor& x, Tensor& q, Tensor& scale);
void quantize_fp8_per_tensor_cpu(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8_cpu(const Tensor& q, const Tensor& scale, Tensor& y);
void quantize_fp8_per_token_gpu(const Tensor& x, Tensor& q, Tensor& scale);
void quantize_fp8_per_tensor_gpu(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8_gpu(const Tensor& q, const Tensor& scale, Tensor& y);

}  // namespace anvil
