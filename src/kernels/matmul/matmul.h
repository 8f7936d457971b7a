// matmul: general 2-D matrix products, the linear layer built on them, and FP8 products with scales.
//
// Shapes:  matmul: c (M, N) = alpha * op(a) @ op(b) + beta * c, op(a) (M, K), op(b) (K, N);
//          a is (M, K) or, with trans_a, (K, M); b is (K, N) or, with trans_b, (N, K). Row-major, contiguous.
//          linear: x (N, C) [N = B*T rows], w (OC, C) [Hugging Face nn.Linear layout], bias (OC), y (N, OC).
// Dtypes:  a, b in f32/bf16/f16 (the same); c in the same dtype, or f32 (gradient accumulation with beta=1).
//          fp8: a, w in e4m3fn (or e5m2 for a); scales f32 on the device; out bf16/f32.
// Numerics: fp32 accumulation everywhere; cuBLASLt on NVIDIA, the portable tiled kernel on AMD and as fallback,
//          OpenBLAS on the CPU (bf16/f16 inputs are widened to f32 in blocks).
// Gradients: dx is overwritten; dw and dbias are accumulated into (+=), f32.
#pragma once
#include "core/tensor.h"

namespace anvil {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha = 1.f,
            float beta = 0.f);

// y = x @ w^T (+ bias).  bias may be undefined.
void matmul_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
// dx = dy @ w (if dx defined); dw += dy^T @ x (if dw defined); dbias += sum_rows(dy) (if dbias defined).
void matmul_bwd(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& dbias);

// out (M, N) = (a_scale * a) @ (w_scale * w)^T with a (M, K) fp8, w (N, K) fp8; a_scale f32 [1];
// w_scale f32 [1] (per tensor) or [N] (per output channel).
void matmul_fp8(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);

// fp64 references.
void matmul_ref(const double* a, const double* b, double* c, int64_t M, int64_t N, int64_t K, bool trans_a,
                bool trans_b, double alpha, double beta);

// Backends.
void matmul_cpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);
void matmul_gpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);
void matmul_fp8_cpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);
void matmul_fp8_gpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);

}  // namespace anvil
