// matmul: general 2-D matrix products, the linear layer built on them, and FP8 products with scales.
//
// Shapes:  matmul: c (M, N) = alpha * op(a) @ op(b) + beta * c, op(a) (M, K), op(b) (K, N);
//          a is (M, K) or, with trans_a, (K, M); b is (K, N) or, with trans_b, (N, K). Row-major, contiguous.
//          linear: x (N, C) or (B, T, C) [N = B*T rows, leading dims flattened], w (OC, C) [Hugging Face
//          nn.Linear layout], bias (OC), y (N, OC) or (B, T, OC).
// Dtypes:  a, b in f32/bf16/f16 (the same); c in the same dtype, or f32 (gradient accumulation with beta=1).
//          fp8: w in e4m3fn/e5m2/e4m3fnuz/e5m2fnuz; a in an fp8 dtype, or bf16 (weight-only FP8: a_scale then
//          still multiplies); scales f32 on a's device; out bf16/f32.
// Numerics: fp32 accumulation everywhere, c rounded once into its dtype; beta == 0 never reads c (it may hold
//          NaN garbage). On the GPU, products with few rows (c = a @ b^T, beta = 0, 16-bit b, or weight-only FP8
//          with bf16 a) take the skinny decode kernel (kernels/skinny_gemm); the rest cuBLASLt on NVIDIA, the
//          portable tiled kernel on AMD and as fallback (ANVIL_GEMM=tiled forces it, ANVIL_GEMM=vendor skips the
//          skinny kernel). OpenBLAS on the CPU (bf16/f16 inputs are widened to f32 in row panels), except
//          products c = a @ b^T of at most 4 rows with beta = 0, which read b once through skinny_gemm_cpu.
// Gradients: dx is overwritten (x's dtype); dw and dbias are accumulated into (+=), f32.
#pragma once
#include "core/tensor.h"

namespace anvil {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha = 1.f,
            float beta = 0.f);

// Batched: c[i] (M, N) = alpha * op(a[i]) @ op(b[i]) + beta * c[i] for i < B, one launch on the GPU.
//   a (Ba, M, K) or (Ba, K, M), b (Bb, K, N) or (Bb, N, K), c (B, M, N); Ba and Bb are B or 1, a batch of 1
//   being shared by every product (a weight against per-sequence activations). Channel-major models (Mamba's
//   (B, D, T) tensors) multiply each sequence by a weight this way; one launch per sequence ran small GEMMs at
//   6-12 µs each, most of it fixed cost.
void matmul_batched(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha = 1.f,
                    float beta = 0.f);
// Batch sum: c (M, N) = alpha * sum_i op(a[i]) @ op(b[i]) + beta * c, a (B, ...), b (B, ...) as above with
// Ba = Bb = B. The weight gradient of a batched product whose K runs inside each batch (K = T of a (B, D, T)
// tensor), which is no single 2-D GEMM. GPU: batched products into an f32 scratch, then one reduction.
void matmul_batch_sum(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha = 1.f,
                      float beta = 0.f);

// y = x @ w^T (+ bias).  bias may be undefined.
void matmul_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
// dx = dy @ w (if dx defined); dw += dy^T @ x (if dw defined); dbias += sum_rows(dy) (if dbias defined).
void matmul_bwd(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& dbias);

// out (M, N) = (a_scale * a) @ (w_scale * w)^T with a (M, K), w (N, K); a_scale f32 [1], or [M] (per row: the
// per-token scales of dynamically quantised rows; fp8 a only); w_scale f32 [1] (per tensor) or [N] (per output
// channel). cuBLASLt applies both vectors in its epilogue (outer-vector scaling), so per-token rows need no
// second pass over out.
void matmul_fp8(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);

// fp64 references (the spec). All arrays row-major.
void matmul_ref(const double* a, const double* b, double* c, int64_t M, int64_t N, int64_t K, bool trans_a,
                bool trans_b, double alpha, double beta);
// Linear: x (N, C), w (OC, C), bias (OC) or nullptr, y (N, OC).
void matmul_fwd_ref(const double* x, const double* w, const double* bias, double* y, int64_t N, int64_t C,
                    int64_t OC);
// dx (N, C) overwritten; dw (OC, C) and dbias (OC) accumulated into; any of the three may be nullptr.
void matmul_bwd_ref(const double* dy, const double* x, const double* w, double* dx, double* dw, double* dbias,
                    int64_t N, int64_t C, int64_t OC);
// FP8: a (M, K) and w (N, K) hold the already-decoded fp8 values; a_scale has M entries, or 1 if !per_row;
// w_scale has N entries, or 1 if !per_channel.
void matmul_fp8_ref(const double* a, const double* a_scale, bool per_row, const double* w, const double* w_scale,
                    bool per_channel, double* out, int64_t M, int64_t N, int64_t K);

// Backends (arguments already checked). Batched products: `batch` matrices, operand i at base + i * stride
// elements (stride 0: shared); a plain product is batch 1.
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void matmul_cpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);
void matmul_gpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta,
                const GemmBatch& batch = {});
// c (M, N) = alpha * sum_i parts[i] + beta * c; parts (B, M, N) f32 on the GPU.
void matmul_sum_parts_gpu(const Tensor& parts, Tensor& c, float alpha, float beta);
void matmul_fp8_cpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);
void matmul_fp8_gpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out);
// Linear-layer helpers: y (N, OC) = bias broadcast over rows (before a beta=1 product, so y is rounded once);
// dbias (OC, f32) += column sums of dy (N, OC).
void matmul_bias_rows_cpu(const Tensor& bias, Tensor& y);
void matmul_bias_rows_gpu(const Tensor& bias, Tensor& y);
void matmul_dbias_cpu(const Tensor& dy, Tensor& dbias);
void matmul_dbias_gpu(const Tensor& dy, Tensor& dbias);

}  // namespace anvil
