// fp64 reference for matmul, the linear layer and the FP8 product, written to be read.
#include "kernels/matmul/matmul.h"

namespace anvil {

// c[m][n] = alpha * sum_k op(a)[m][k] * op(b)[k][n] + beta * c[m][n]
//   op(a)[m][k] = trans_a ? a[k][m] (a is (K, M)) : a[m][k] (a is (M, K))
//   op(b)[k][n] = trans_b ? b[n][k] (b is (N, K)) : b[k][n] (b is (K, N))
// beta == 0 does not read c (BLAS convention: c may hold garbage).
void matmul_ref(const double* a, const double* b, double* c, int64_t M, int64_t N, int64_t K, bool trans_a,
                bool trans_b, double alpha, double beta) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        double av = trans_a ? a[k * M + m] : a[m * K + k];
        double bv = trans_b ? b[n * K + k] : b[k * N + n];
        s += av * bv;
      }
      c[m * N + n] = alpha * s + (beta == 0 ? 0.0 : beta * c[m * N + n]);
    }
}

// y[n][o] = sum_c x[n][c] * w[o][c] + bias[o]
void matmul_fwd_ref(const double* x, const double* w, const double* bias, double* y, int64_t N, int64_t C,
                    int64_t OC) {
  matmul_ref(x, w, y, N, OC, C, false, true, 1.0, 0.0);
  if (bias)
    for (int64_t n = 0; n < N; n++)
      for (int64_t o = 0; o < OC; o++) y[n * OC + o] += bias[o];
}

// dx = dy @ w (N, C);  dw += dy^T @ x (OC, C);  dbias += sum over rows of dy (OC).
void matmul_bwd_ref(const double* dy, const double* x, const double* w, double* dx, double* dw, double* dbias,
                    int64_t N, int64_t C, int64_t OC) {
  if (dx) matmul_ref(dy, w, dx, N, C, OC, false, false, 1.0, 0.0);
  if (dw) matmul_ref(dy, x, dw, OC, C, N, true, false, 1.0, 1.0);
  if (dbias)
    for (int64_t n = 0; n < N; n++)
      for (int64_t o = 0; o < OC; o++) dbias[o] += dy[n * OC + o];
}

// out[m][n] = a_scale[m or 0] * w_scale[n or 0] * sum_k a[m][k] * w[n][k]
void matmul_fp8_ref(const double* a, const double* a_scale, bool per_row, const double* w, const double* w_scale,
                    bool per_channel, double* out, int64_t M, int64_t N, int64_t K) {
  matmul_ref(a, w, out, M, N, K, false, true, 1.0, 0.0);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) out[m * N + n] *= a_scale[per_row ? m : 0] * w_scale[per_channel ? n : 0];
}

}  // namespace anvil
