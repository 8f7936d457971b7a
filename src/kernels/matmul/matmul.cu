// GPU matmul dispatch: the skinny kernel (kernels/skinny_gemm) for products with few rows, the vendor library
// (cuBLASLt on NVIDIA) where it supports the case, else the portable tiled kernel (matmul_tiled.cu; all of AMD).
// ANVIL_GEMM=tiled forces the tiled kernel and ANVIL_GEMM=vendor skips the skinny one, so one GPU test run can
// check every path and time the crossover. Also the linear layer's two small kernels: bias broadcast and the bias
// gradient.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/gpu/common.cuh"
#include "backends/gpu/vendor/gemm.h"
#include "core/dispatch.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_tiled.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace {

enum class GemmPath { automatic, vendor, tiled, skinny };

// Read on every call (a getenv is ~100 ns, a GEMM launch several µs) so a process can switch paths.
GemmPath gemm_path() {
  const char* e = std::getenv("ANVIL_GEMM");
  if (!e || !*e || std::string(e) == "auto") return GemmPath::automatic;
  if (std::string(e) == "tiled") return GemmPath::tiled;
  if (std::string(e) == "vendor") return GemmPath::vendor;
  if (std::string(e) == "skinny") return GemmPath::skinny;  // wherever its shape allows (M <= 16): for A/B
  ANVIL_THROW("ANVIL_GEMM", "'tiled', 'vendor', 'skinny' or 'auto' (or unset)", str("'", e, "'"));
}

// kSkinnyCrossoverRows (skinny_gemm.h): the rows up to which 16-bit decode products take the skinny kernel.

constexpr int kThreads = 256;

// y (rows, OC) = bias broadcast over rows, converted to y's dtype (exact: bias has x's dtype, y x's or f32).
template <class TB, class TY>
__global__ void bias_rows_kernel(const TB* __restrict__ bias, TY* __restrict__ y, int64_t total, int OC) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads)
    y[i] = from_f32<TY>(to_f32(bias[i % OC]));
}

// Bias gradient, two passes so it is deterministic (no atomics): block (x, y) sums column x*256 + t over rows
// y, y + G, y + 2G, ... into part (G, OC); then the G partial rows are added into dbias. Each row segment is read
// by 256 consecutive threads: coalesced.
template <class T>
__global__ void col_sum_part_kernel(const T* __restrict__ dy, float* __restrict__ part, int64_t rows, int OC) {
  const int col = int(blockIdx.x) * kThreads + int(threadIdx.x);
  if (col >= OC) return;
  float s = 0.f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) s += to_f32(dy[r * OC + col]);
  part[int64_t(blockIdx.y) * OC + col] = s;
}
__global__ void add_part_rows_kernel(const float* __restrict__ part, float* __restrict__ dbias, int G, int OC) {
  const int col = int(blockIdx.x) * kThreads + int(threadIdx.x);
  if (col >= OC) return;
  float s = 0.f;
  for (int g = 0; g < G; g++) s += part[int64_t(g) * OC + col];
  dbias[col] += s;
}

// c[i] = alpha * sum_p parts[p][i] + beta * c[i] over the M*N outputs; consecutive threads take consecutive i,
// so each of the B part rows is read coalesced. beta == 0 never reads c.
template <class TC>
__global__ void sum_parts_kernel(const float* __restrict__ parts, TC* __restrict__ c, int64_t MN, int B, float alpha,
                                 float beta) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < MN; i += int64_t(gridDim.x) * kThreads) {
    float s = 0.f;
    for (int p = 0; p < B; p++) s += parts[int64_t(p) * MN + i];
    float v = alpha * s;
    if (beta != 0.f) v += beta * to_f32(c[i]);
    c[i] = from_f32<TC>(v);
  }
}

}  // namespace

void matmul_sum_parts_gpu(const Tensor& parts, Tensor& c, float alpha, float beta) {
  const int64_t MN = c.numel();
  const int B = int(parts.size(0));
  if (MN == 0) return;
  const int cu = gpu::device_info(gpu::current_device()).compute_units;
  const int blocks = int(std::min<int64_t>(gpu::ceil_div(MN, kThreads), int64_t(cu) * 8));
  ANVIL_DISPATCH_FLOAT(c.dtype(), TC, {
    sum_parts_kernel<TC><<<blocks, kThreads, 0, gpu::stream()>>>(parts.data<float>(), c.data<TC>(), MN, B, alpha, beta);
    ANVIL_LAUNCH_CHECK();
  });
}

void matmul_gpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta,
                const GemmBatch& batch) {
  const int64_t M = c.size(0), N = c.size(1), K = trans_a ? a.size(0) : a.size(1);
  if (M == 0 || N == 0 || batch.count == 0) return;
  const GemmPath path = gemm_path();
  // The decode shape: c (M, N) = a (M, K) @ b^T with b (N, K) a 16-bit weight, nothing to accumulate into.
  const int64_t skinny_rows = path == GemmPath::skinny ? kSkinnyMaxRows
                              : path == GemmPath::automatic ? kSkinnyCrossoverRows : 0;
  if (batch.count == 1 && M <= skinny_rows && K > 0 && !trans_a && trans_b && beta == 0.f &&
      (b.dtype() == DType::bf16 || b.dtype() == DType::f16))
    return skinny_gemm_gpu(a, Tensor(), b, Tensor(), alpha, c);
  if (path != GemmPath::tiled) {
    gpu::VendorGemm g;
    g.M = M, g.N = N, g.K = K;
    g.a = a.data_ptr(), g.a_dtype = a.dtype(), g.trans_a = trans_a;
    g.b = b.data_ptr(), g.b_dtype = b.dtype(), g.trans_b = trans_b;
    g.c = c.data_ptr(), g.c_dtype = c.dtype();
    g.alpha = alpha, g.beta = beta;
    g.batch = batch.count, g.stride_a = batch.stride_a, g.stride_b = batch.stride_b, g.stride_c = batch.stride_c;
    if (gpu::vendor_gemm(g)) return;
  }
  TiledGemm t;
  t.a = a.data_ptr(), t.a_dtype = a.dtype();
  t.sam = trans_a ? 1 : K, t.sak = trans_a ? M : 1;  // op(a)(m, k) = a[m][k], or a[k][m] for a (K, M)
  t.b = b.data_ptr(), t.b_dtype = b.dtype();
  t.sbk = trans_b ? 1 : N, t.sbn = trans_b ? K : 1;  // op(b)(k, n) = b[k][n], or b[n][k] for b (N, K)
  t.c = c.data_ptr(), t.c_dtype = c.dtype();
  t.M = int(M), t.N = int(N), t.K = int(K);
  t.alpha = alpha, t.beta = beta;
  t.batch = batch.count, t.bsa = batch.stride_a, t.bsb = batch.stride_b, t.bsc = batch.stride_c;
  matmul_tiled(t);
}

void matmul_fp8_gpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out) {
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  if (M == 0 || N == 0) return;
  const bool per_channel = w_scale.numel() == N && N > 1;
  const bool per_row = a_scale.numel() == M && M > 1;  // per-token scales: fp8 a (matmul_fp8 checked)
  const GemmPath path = gemm_path();
  // Weight-only FP8 with few rows: the skinny kernel decodes the e4m3 weights in registers.
  if ((path == GemmPath::automatic || path == GemmPath::skinny) && M <= kSkinnyMaxRows && K > 0 &&
      a.dtype() == DType::bf16 &&
      (w.dtype() == DType::e4m3fn || w.dtype() == DType::e4m3fnuz))
    return skinny_gemm_gpu(a, a_scale, w, w_scale, 1.f, out);
  // Native FP8 needs fp8 activations too; other weight-only FP8 dequantizes in the tiled kernel.
  if (path != GemmPath::tiled && dtype_is_fp8(a.dtype())) {
    gpu::VendorGemm g;
    g.M = M, g.N = N, g.K = K;
    g.a = a.data_ptr(), g.a_dtype = a.dtype(), g.trans_a = false;
    g.b = w.data_ptr(), g.b_dtype = w.dtype(), g.trans_b = true;
    g.c = out.data_ptr(), g.c_dtype = out.dtype();
    g.scale_a = a_scale.data<float>(), g.scale_b = w_scale.data<float>();
    g.per_row_a = per_row, g.per_channel_b = per_channel;
    if (gpu::vendor_gemm(g)) return;
  }
  TiledGemm t;
  t.a = a.data_ptr(), t.a_dtype = a.dtype(), t.sam = K, t.sak = 1;
  t.b = w.data_ptr(), t.b_dtype = w.dtype(), t.sbk = 1, t.sbn = K;
  t.c = out.data_ptr(), t.c_dtype = out.dtype();
  t.M = int(M), t.N = int(N), t.K = int(K);
  t.scale_a = a_scale.data<float>(), t.scale_m_stride = per_row ? 1 : 0;
  t.scale_n = w_scale.data<float>(), t.scale_n_stride = per_channel ? 1 : 0;
  matmul_tiled(t);
}

void matmul_bias_rows_gpu(const Tensor& bias, Tensor& y) {
  const int64_t total = y.numel();
  const int OC = int(bias.numel());
  if (total == 0) return;
  const int cu = gpu::device_info(gpu::current_device()).compute_units;
  const int blocks = int(std::min<int64_t>(gpu::ceil_div(total, kThreads), int64_t(cu) * 8));
  ANVIL_DISPATCH_FLOAT(bias.dtype(), T, {
    if (y.dtype() == DType::f32)
      bias_rows_kernel<T, float><<<blocks, kThreads, 0, gpu::stream()>>>(bias.data<T>(), y.data<float>(), total, OC);
    else
      bias_rows_kernel<T, T><<<blocks, kThreads, 0, gpu::stream()>>>(bias.data<T>(), y.data<T>(), total, OC);
    ANVIL_LAUNCH_CHECK();
  });
}

void matmul_dbias_gpu(const Tensor& dy, Tensor& dbias) {
  const int OC = int(dbias.numel());
  const int64_t rows = OC ? dy.numel() / OC : 0;
  if (rows == 0) return;
  // About two blocks per SM/CU in the first pass: OC=4096 gives 16 column blocks x G row groups.
  const int cu = gpu::device_info(gpu::current_device()).compute_units;
  const int col_blocks = gpu::ceil_div(OC, kThreads);
  const int G = int(std::max<int64_t>(1, std::min<int64_t>({rows, 2 * cu / col_blocks, 65535})));
  Tensor part = Tensor::empty({G, OC}, DType::f32, dy.device());
  ANVIL_DISPATCH_FLOAT(dy.dtype(), T, {
    col_sum_part_kernel<T><<<dim3(unsigned(col_blocks), unsigned(G)), kThreads, 0, gpu::stream()>>>(
        dy.data<T>(), part.data<float>(), rows, OC);
    ANVIL_LAUNCH_CHECK();
  });
  add_part_rows_kernel<<<col_blocks, kThreads, 0, gpu::stream()>>>(part.data<float>(), dbias.data<float>(), G, OC);
  ANVIL_LAUNCH_CHECK();
}

}  // namespace anvil
