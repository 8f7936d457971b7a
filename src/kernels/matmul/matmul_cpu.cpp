// CPU matmul through OpenBLAS cblas_sgemm. bf16/f16 operands are widened to f32 (b once, a and c in row panels
// of ~16 MiB so the extra memory stays bounded); FP8 operands are decoded through a 256-entry table and scaled.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "core/dispatch.h"
#include "kernels/matmul/matmul.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace {

// Rows up to which a product c = a b^T reads b row by row (skinny_gemm_cpu) instead of through sgemm.
constexpr int64_t kCpuSkinnyRows = 4;
constexpr int64_t kPanelFloats = int64_t(4) << 20;  // 4M floats = 16 MiB per widened panel

template <class T>
void widen_rows(const T* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = to_f32(src[r * ld + c]);
}
template <class T>
void narrow_rows(const float* src, int64_t rows, int64_t cols, T* dst) {
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t i = 0; i < rows * cols; i++) dst[i] = from_f32<T>(src[i]);
}

// Low-precision operands: op(a) rows [m0, m0+mb) and c rows [m0, m0+mb) per panel, b widened once.
template <class T>
void matmul_lowp(const T* a, const T* b, void* c, DType c_dtype, int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                 float alpha, float beta) {
  std::vector<float> bf(size_t(K * N));
  widen_rows(b, tb ? N : K, tb ? K : N, tb ? K : N, bf.data());  // row by row: rows go to OpenMP threads
  const int64_t MB = std::max<int64_t>(1, std::min(M, kPanelFloats / std::max(K, N)));
  std::vector<float> af(size_t(MB * K)), cf;
  if (c_dtype != DType::f32) cf.resize(size_t(MB * N));
  for (int64_t m0 = 0; m0 < M; m0 += MB) {
    const int64_t mb = std::min(MB, M - m0);
    int64_t lda;
    if (!ta) {  // a (M, K): the panel is mb contiguous rows
      widen_rows(a + m0 * K, mb, K, K, af.data());
      lda = K;
    } else {    // a (K, M): the panel is columns [m0, m0+mb) of every row, kept (K, mb) and read transposed
      widen_rows(a + m0, K, mb, M, af.data());
      lda = mb;
    }
    float* cp;
    if (c_dtype == DType::f32) {
      cp = static_cast<float*>(c) + m0 * N;
    } else {
      cp = cf.data();
      if (beta != 0) widen_rows(static_cast<const T*>(c) + m0 * N, mb, N, N, cp);
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(mb), int(N),
                int(K), alpha, af.data(), int(lda), bf.data(), int(tb ? K : N), beta, cp, int(N));
    if (c_dtype != DType::f32) narrow_rows(cp, mb, N, static_cast<T*>(c) + m0 * N);
  }
}

// K == 0: the product is empty, c = beta * c (and beta == 0 must not read c).
void scale_c(Tensor& c, float beta) {
  for (size_t i = 0; i < size_t(c.numel()); i++)
    store_from_f32(c.data_ptr(), c.dtype(), i, beta == 0 ? 0.f : beta * load_as_f32(c.data_ptr(), c.dtype(), i));
}

// 256-entry decode table of an fp8 dtype (exact in f32).
std::vector<float> fp8_table(DType t) {
  std::vector<float> lut(256);
  for (int i = 0; i < 256; i++) lut[size_t(i)] = fp8_to_f32(uint8_t(i), fp8_format(t));
  return lut;
}

// db (OC) += column sums of g (rows, OC); tasks own 256 columns, so each reads contiguous row segments.
template <class T>
void col_sums_add(const T* g, int64_t rows, int64_t OC, float* db) {
  constexpr int64_t kCols = 256;
#pragma omp parallel for
  for (int64_t o0 = 0; o0 < OC; o0 += kCols) {
    const int64_t nc = std::min(kCols, OC - o0);
    float acc[kCols] = {};
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < nc; j++) acc[j] += to_f32(g[r * OC + o0 + j]);
    for (int64_t j = 0; j < nc; j++) db[o0 + j] += acc[j];
  }
}

}  // namespace

void matmul_cpu(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  const int64_t M = c.size(0), N = c.size(1), K = trans_a ? a.size(0) : a.size(1);
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(c, beta);
  // Decode's few rows against a weight (c = a b^T): the skinny kernel reads b once, in place. sgemm packs all of b
  // into its buffer first, and bf16 b was widened to f32 before that: Llama-3.2-1B shape f32 decode on 2 cores
  // took 488 ms/token with sgemm and 152 with this, bf16 3.67 s and 92 ms (docs/cpu.md).
  if (!trans_a && trans_b && beta == 0.f && M <= kCpuSkinnyRows)
    return skinny_gemm_cpu(a, Tensor(), b, Tensor(), alpha, c);
  if (a.dtype() == DType::f32) {  // then b and c are f32 too
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(M),
                int(N), int(K), alpha, a.data<float>(), int(trans_a ? M : K), b.data<float>(), int(trans_b ? K : N),
                beta, c.data<float>(), int(N));
    return;
  }
  ANVIL_DISPATCH_FLOAT(a.dtype(), T,
                       matmul_lowp<T>(a.data<T>(), b.data<T>(), c.data_ptr(), c.dtype(), M, N, K, trans_a, trans_b,
                                      alpha, beta));
}

void matmul_fp8_cpu(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out) {
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  if (M == 0 || N == 0) return;
  const float* sa = a_scale.data<float>();
  const float* sw = w_scale.data<float>();
  const bool per_row = a_scale.numel() == M && M > 1, per_channel = w_scale.numel() == N && N > 1;
  // a (M, K) and w (N, K) decoded to f32 with their scales folded in: one rounding per element (2^-24; a decoded
  // fp8 value is exact in f32).
  std::vector<float> af(size_t(M * K)), wf(size_t(N * K));
  if (dtype_is_fp8(a.dtype())) {
    const auto lut = fp8_table(a.dtype());
    const uint8_t* p = static_cast<const uint8_t*>(a.data_ptr());
#pragma omp parallel for if (M * K > 65536)
    for (int64_t m = 0; m < M; m++) {
      const float s = sa[per_row ? m : 0];
      for (int64_t k = 0; k < K; k++) af[size_t(m * K + k)] = lut[p[m * K + k]] * s;
    }
  } else {  // weight-only FP8: a is bf16, one scale
    const bf16* p = a.data<bf16>();
#pragma omp parallel for if (M * K > 65536)
    for (int64_t i = 0; i < M * K; i++) af[size_t(i)] = to_f32(p[i]) * sa[0];
  }
  const auto lut = fp8_table(w.dtype());
  const uint8_t* p = static_cast<const uint8_t*>(w.data_ptr());
#pragma omp parallel for if (N * K > 65536)
  for (int64_t n = 0; n < N; n++) {
    const float s = sw[per_channel ? n : 0];
    for (int64_t k = 0; k < K; k++) wf[size_t(n * K + k)] = lut[p[n * K + k]] * s;
  }
  std::vector<float> tmp;
  float* o = out.dtype() == DType::f32 ? out.data<float>() : (tmp.resize(size_t(M * N)), tmp.data());
  if (K == 0) std::fill(o, o + M * N, 0.f);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.f, af.data(), int(K), wf.data(),
                int(K), 0.f, o, int(N));
  if (out.dtype() == DType::bf16) narrow_rows(o, M, N, out.data<bf16>());
}

void matmul_bias_rows_cpu(const Tensor& bias, Tensor& y) {
  const int64_t OC = bias.numel(), rows = OC ? y.numel() / OC : 0;
  if (rows == 0) return;
  for (int64_t o = 0; o < OC; o++)
    store_from_f32(y.data_ptr(), y.dtype(), size_t(o), load_as_f32(bias.data_ptr(), bias.dtype(), size_t(o)));
  const size_t row_bytes = size_t(OC) * dtype_size(y.dtype());
  char* base = static_cast<char*>(y.data_ptr());
#pragma omp parallel for if (rows > 64)
  for (int64_t r = 1; r < rows; r++) std::copy(base, base + row_bytes, base + size_t(r) * row_bytes);
}

void matmul_dbias_cpu(const Tensor& dy, Tensor& dbias) {
  const int64_t OC = dbias.numel(), rows = OC ? dy.numel() / OC : 0;
  ANVIL_DISPATCH_FLOAT(dy.dtype(), T, col_sums_add(dy.data<T>(), rows, OC, dbias.data<float>()));
}

}  // namespace anvil
