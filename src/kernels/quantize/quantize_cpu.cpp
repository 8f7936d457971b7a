// CPU FP8 quantisation: rows in parallel (OpenMP), the same f32 operations as the GPU kernels (bit-identical).
#include <algorithm>
#include <cmath>

#include "core/dispatch.h"
#include "kernels/quantize/fp8_e4m3.h"
#include "kernels/quantize/quantize.h"

namespace anvil {
namespace {

template <class T>
void per_token(const T* x, uint8_t* q, float* scale, int64_t M, int64_t K, float fmax, bool fnuz) {
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; m++) {
    const T* xr = x + m * K;
    float amax = 0.f;
    for (int64_t k = 0; k < K; k++) amax = std::fmax(amax, std::fabs(to_f32(xr[k])));  // fmax skips NaN
    const float s = std::fmax(amax / fmax, kFp8MinScale), r = 1.f / s;
    scale[m] = s;
    for (int64_t k = 0; k < K; k++) q[m * K + k] = e4m3_encode(to_f32(xr[k]) * r, fnuz);
  }
}

template <class T>
void per_tensor(const T* x, uint8_t* q, float s, int64_t n, bool fnuz) {
  const float r = 1.f / s;
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; i++) q[i] = e4m3_encode(to_f32(x[i]) * r, fnuz);
}

template <class T>
void dequant(const uint8_t* q, const float* scale, bool per_row, T* y, int64_t M, int64_t K, bool fnuz) {
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; m++) {
    const float s = scale[per_row ? m : 0];
    for (int64_t k = 0; k < K; k++) y[m * K + k] = from_f32<T>(e4m3_decode(q[m * K + k], fnuz) * s);
  }
}

}  // namespace

void quantize_fp8_per_token_cpu(const Tensor& x, Tensor& q, Tensor& scale) {
  const int64_t M = x.size(0), K = x.size(1);
  const bool fnuz = q.dtype() == DType::e4m3fnuz;
  uint8_t* qp = static_cast<uint8_t*>(q.data_ptr());
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       per_token(x.data<T>(), qp, scale.data<float>(), M, K, fp8_max(q.dtype()), fnuz));
}

void quantize_fp8_per_tensor_cpu(const Tensor& x, const Tensor& scale, Tensor& q) {
  const bool fnuz = q.dtype() == DType::e4m3fnuz;
  uint8_t* qp = static_cast<uint8_t*>(q.data_ptr());
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, per_tensor(x.data<T>(), qp, scale.data<float>()[0], x.numel(), fnuz));
}

void dequantize_fp8_cpu(const Tensor& q, const Tensor& scale, Tensor& y) {
  const int64_t M = q.size(0), K = q.size(1);
  const bool fnuz = q.dtype() == DType::e4m3fnuz, per_row = scale.numel() == M && M > 1;
  const uint8_t* qp = static_cast<const uint8_t*>(q.data_ptr());
  ANVIL_DISPATCH_FLOAT(y.dtype(), T, dequant(qp, scale.data<float>(), per_row, y.data<T>(), M, K, fnuz));
}

}  // namespace anvil
