// CPU skinny_gemm: output columns in parallel (OpenMP); each thread takes one weight row as f32 (f32 rows in place,
// bf16 widened inside the dot product, f16 and FP8 decoded once into a buffer) and its dot product with the M
// activation rows (widened to f32 once). Eight partial sums per dot product keep the f32 accumulation error near
// sqrt(K) ulps and let the compiler vectorise. matmul_cpu sends its few-row products c = a b^T here too.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/simd.h"
#include "core/dispatch.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace {

// Built for AVX-512, AVX2 and the baseline (ANVIL_CPU_CLONES, backends/cpu/simd.h).
ANVIL_CPU_CLONES float dot8(const float* a, const float* b, int64_t K) {
  float s[8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; j++) s[j] += a[k + j] * b[k + j];
  for (; k < K; k++) s[0] += a[k] * b[k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// The same sums with b a bf16 row, widened in the loop (bf16 is f32's upper half: a shift, which vectorises; the
// decode of a whole row into a buffer first ran bf16 decode at half the speed of f32 on the CPU).
ANVIL_CPU_CLONES float dot8_bf16(const float* a, const uint16_t* b, int64_t K) {
  float s[8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; j++) s[j] += a[k + j] * __builtin_bit_cast(float, uint32_t(b[k + j]) << 16);
  for (; k < K; k++) s[0] += a[k] * __builtin_bit_cast(float, uint32_t(b[k]) << 16);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Weight row n of w (N, K) as f32: f32 rows in place, f16 and FP8 decoded into buf (bf16 rows go to dot8_bf16).
const float* weight_row(const Tensor& w, const float* lut, int64_t n, int64_t K, float* buf) {
  const int64_t o = n * K;
  switch (w.dtype()) {
    case DType::f32:
      return w.data<float>() + o;
    case DType::f16: {
      const f16* p = w.data<f16>() + o;
      for (int64_t k = 0; k < K; k++) buf[k] = to_f32(p[k]);
      return buf;
    }
    default: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data_ptr()) + o;
      for (int64_t k = 0; k < K; k++) buf[k] = lut[p[k]];
      return buf;
    }
  }
}

}  // namespace

void skinny_gemm_cpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (M == 0 || N == 0) return;
  std::vector<float> xf(size_t(M * K)), lut(256);
  for (int64_t i = 0; i < M * K; i++) xf[size_t(i)] = load_as_f32(x.data_ptr(), x.dtype(), size_t(i));
  if (dtype_is_fp8(w.dtype()))
    for (int i = 0; i < 256; i++) lut[size_t(i)] = fp8_to_f32(uint8_t(i), fp8_format(w.dtype()));
  const float s0 = alpha * (x_scale.defined() ? x_scale.data<float>()[0] : 1.f);
  const float* ws = w_scale.defined() ? w_scale.data<float>() : nullptr;
  const bool per_channel = ws && w_scale.numel() == N && N > 1;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(K));
#pragma omp for
    for (int64_t n = 0; n < N; n++) {
      const float s = s0 * (ws ? ws[per_channel ? n : 0] : 1.f);
      if (w.dtype() == DType::bf16) {
        const uint16_t* wr = static_cast<const uint16_t*>(w.data_ptr()) + n * K;
        for (int64_t m = 0; m < M; m++)
          store_from_f32(y.data_ptr(), y.dtype(), size_t(m * N + n), dot8_bf16(xf.data() + m * K, wr, K) * s);
        continue;
      }
      const float* wr = weight_row(w, lut.data(), n, K, row.data());
      for (int64_t m = 0; m < M; m++)
        store_from_f32(y.data_ptr(), y.dtype(), size_t(m * N + n), dot8(xf.data() + m * K, wr, K) * s);
    }
  }
}

}  // namespace anvil

namespace anvil {

// The prologue's x materialised in f32 (rstd folded in), then the plain product: the same function as the GPU
// kernel up to f32 rounding order.
void skinny_gemm_fused_cpu(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y) {
  const int64_t M = pro.rows(), K = pro.cols();
  Tensor x = Tensor::empty({M, K}, DType::f32, Device::cpu());
  float* xf = x.data<float>();
  if (pro.kind == SkinnyPrologue::Kind::swiglu) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t k = 0; k < K; k++) {
        const float g = load_as_f32(pro.gu.data_ptr(), pro.gu.dtype(), size_t(m * 2 * K + k));
        const float u = load_as_f32(pro.gu.data_ptr(), pro.gu.dtype(), size_t(m * 2 * K + K + k));
        xf[m * K + k] = g / (1.f + cpu::exp_simd(-g)) * u;  // as swiglu_cpu.cpp
      }
  } else {
    const DType dt = pro.a.dtype();
    for (int64_t m = 0; m < M; m++) {
      double ss = 0;
      for (int64_t k = 0; k < K; k++) {
        const size_t i = size_t(m * K + k);
        float h = load_as_f32(pro.a.data_ptr(), dt, i);
        if (pro.b.defined()) {
          store_from_f32(pro.h_out.data_ptr(), dt, i, h + load_as_f32(pro.b.data_ptr(), dt, i));
          h = load_as_f32(pro.h_out.data_ptr(), dt, i);  // rounded to the dtype, as stored
        }
        ss += double(h) * h;
        xf[i] = h;
      }
      const float r = 1.f / std::sqrt(float(ss / double(K)) + pro.eps);
      for (int64_t k = 0; k < K; k++) xf[m * K + k] *= r * load_as_f32(pro.gamma.data_ptr(), dt, size_t(k));
    }
  }
  skinny_gemm_cpu(x, Tensor(), w, w_scale, 1.f, y);
}

}  // namespace anvil
