// fp64 reference for skinny_gemm, written to be read.
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {

// y[m][n] = w_scale[n or 0] * sum_k x[m][k] * w[n][k]   (x (M, K), w (N, K), y (M, N), all row-major)
void skinny_gemm_ref(const double* x, const double* w, const double* w_scale, bool per_channel, double* y, int64_t M,
                     int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += x[m * K + k] * w[n * K + k];
      const double scale = w_scale ? w_scale[per_channel ? n : 0] : 1.0;
      y[m * N + n] = scale * s;
    }
}

}  // namespace anvil
