// fp64 reference for FP8 quantisation, written to be read.
#include <algorithm>
#include <cmath>

#include "kernels/quantize/quantize.h"

namespace anvil {

// Nearest value of an fp8 format (E exponent bits, 3 mantissa bits for e4m3) to v, ties to even, saturating.
// In the binade [2^e, 2^(e+1)) the spacing is 2^(e-3); below the smallest normal 2^(1-bias) it stays 2^(1-bias-3).
double fp8_round_ref(double v, DType t) {
  if (std::isnan(v)) return v;
  const Fp8Format f = fp8_format(t);
  const double max = f.max, a = std::fabs(v);
  if (a >= max) return std::copysign(max, v);
  if (a == 0) return (f.fnuz ? 0.0 : v);  // fnuz has no negative zero
  const int e = std::max(std::ilogb(a), 1 - f.bias);
  const double step = std::ldexp(1.0, e - f.M);
  const double r = std::min(std::nearbyint(a / step) * step, max);  // nearbyint: ties to even
  if (r == 0 && f.fnuz) return 0.0;
  return std::copysign(r, v);
}

// scale[m] = max(amax_k |x[m][k]| / fp8_max, 2^-126);  q[m][k] = fp8(x[m][k] / scale[m])
void quantize_fp8_per_token_ref(const double* x, double* q, double* scale, int64_t M, int64_t K, DType q_dtype) {
  for (int64_t m = 0; m < M; m++) {
    double amax = 0;
    for (int64_t k = 0; k < K; k++)
      if (!std::isnan(x[m * K + k])) amax = std::max(amax, std::fabs(x[m * K + k]));
    scale[m] = std::max(amax / fp8_max(q_dtype), double(kFp8MinScale));
    for (int64_t k = 0; k < K; k++) q[m * K + k] = fp8_round_ref(x[m * K + k] / scale[m], q_dtype);
  }
}

// q[i] = fp8(x[i] / scale)
void quantize_fp8_per_tensor_ref(const double* x, double scale, double* q, int64_t n, DType q_dtype) {
  for (int64_t i = 0; i < n; i++) q[i] = fp8_round_ref(x[i] / scale, q_dtype);
}

// y[m][k] = q[m][k] * scale[m or 0]
void dequantize_fp8_ref(const double* q, const double* scale, bool per_row, double* y, int64_t M, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) y[m * K + k] = q[m * K + k] * scale[per_row ? m : 0];
}

}  // namespace anvil
