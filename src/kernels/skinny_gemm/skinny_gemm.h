// skinny_gemm: the decode GEMM, a few activation rows against a large weight, bound by weight bytes.
//
// Shapes:  y (M, N) = x (M, K) @ (w_scale * w)^T, with M in [0, kSkinnyMaxRows] rows (batch of decode tokens),
//          w (N, K) row-major (Hugging Face nn.Linear layout: one row per output channel n),
//          w_scale f32 (1) per tensor or (N) per output channel, or undefined (= 1; 16-bit weights only).
// Dtypes:  x f32/bf16/f16; w bf16/f16, or e4m3fn/e4m3fnuz (weight-only FP8: decoded to f32 in registers, the
//          activations stay 16/32-bit); y f32/bf16/f16. Any x dtype goes with any w dtype.
// Numerics: fp32 accumulation; the scales multiply the fp32 sum once, then y is rounded once into its dtype.
//          FP8 NaN codes (e4m3fn S.1111.111, e4m3fnuz 0x80) make their output column NaN, as in the reference.
//          Deterministic: split-K partial sums (when the GPU splits K, see docs/decode_kernels.md) are added by a
//          second kernel in a fixed order, never by atomics.
// Fusion:  by stacking, not by a multi-output kernel. Projections that read the same x are one weight whose rows
//          are the concatenated outputs: q, k, v -> w (NH*HD + 2*NKV*HD, C); gate, up -> w (2*H, C). One launch
//          streams all of them; the caller slices y's columns. Per-channel FP8 scales stack the same way.
// Backends: CPU loops (OpenMP over n, f32 accumulation); GPU: a warp-per-columns streaming kernel (skinny_gemm.cu).
//          matmul / matmul_fwd / matmul_fp8 route M <= kSkinnyMaxRows products here on the GPU (matmul.cu).
#pragma once
#include "core/tensor.h"

namespace anvil {

// The most activation rows one call takes: the GPU kernel keeps M x (columns per warp) f32 accumulators per
// lane in registers (16 x 4 = 64), and at 16 rows the fp32 FMA units already cap it (docs/decode_kernels.md).
constexpr int64_t kSkinnyMaxRows = 16;

// Front-end: checks every argument, then runs on x's device.
void skinny_gemm(const Tensor& x, const Tensor& w, const Tensor& w_scale, Tensor& y);

// fp64 reference (the spec): y[m][n] = w_scale[per_channel ? n : 0] * sum_k x[m][k] * w[n][k].
// w holds the already-decoded weight values (fp8 codes decoded exactly); w_scale may be nullptr (= 1).
void skinny_gemm_ref(const double* x, const double* w, const double* w_scale, bool per_channel, double* y, int64_t M,
                     int64_t N, int64_t K);

// Backends (arguments already checked). Internal entry shared with matmul's dispatch: x_scale (f32 (1) on x's
// device) and w_scale may be undefined (= 1); y = alpha * x_scale * w_scale[n] * (x @ w^T).
void skinny_gemm_cpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y);
void skinny_gemm_gpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y);

}  // namespace anvil
