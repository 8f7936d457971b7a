// fp64 references for the elementwise ops, written to be read.
#include <cmath>

#include "kernels/elementwise/elementwise.h"

namespace anvil {

void add_ref(const double* a, const double* b, double* out, int64_t N) {
  for (int64_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}
void add_inplace_ref(double* acc, const double* x, double alpha, int64_t N) {
  for (int64_t i = 0; i < N; i++) acc[i] += alpha * x[i];
}
void add_int_ref(int64_t* x, int64_t v, int64_t N) {
  for (int64_t i = 0; i < N; i++) x[i] += v;
}

void scale_ref(double* x, double s, int64_t N) {
  for (int64_t i = 0; i < N; i++) x[i] *= s;
}
void neg_exp_ref(const double* x, double* out, int64_t N) {
  for (int64_t i = 0; i < N; i++) out[i] = -std::exp(x[i]);
}
void addcmul_inplace_ref(double* acc, const double* a, const double* b, double alpha, int64_t N) {
  for (int64_t i = 0; i < N; i++) acc[i] += alpha * a[i] * b[i];
}
// Quantising divides by the scale, dequantising (an FP8 source) multiplies by it.
void cast_ref(const double* src, double* dst, double scale, bool src_is_fp8, int64_t N) {
  for (int64_t i = 0; i < N; i++) dst[i] = src_is_fp8 ? src[i] * scale : src[i] / scale;
}
void sum_squares_ref(const double* x, double* out, int64_t N) {
  for (int64_t i = 0; i < N; i++) out[0] += x[i] * x[i];
}
void amax_ref(const double* x, double* out, int64_t N) {
  double m = 0;
  for (int64_t i = 0; i < N; i++) {
    if (std::isnan(x[i])) m = NAN;
    if (!std::isnan(m)) m = std::max(m, std::fabs(x[i]));
  }
  out[0] = m;
}

}  // namespace anvil
