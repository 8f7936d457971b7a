// fp64 reference for rms_norm, written to be read.
#include <cmath>

#include "kernels/rms_norm/rms_norm.h"

namespace anvil {

void rms_norm_fwd_ref(const double* x, const double* w, double* y, double* rstd, int64_t N, int64_t C, double eps) {
  for (int64_t n = 0; n < N; n++) {
    const double* xr = x + n * C;
    double ss = 0;
    for (int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
    double r = 1.0 / std::sqrt(ss / double(C) + eps);
    for (int64_t c = 0; c < C; c++) y[n * C + c] = xr[c] * r * w[c];
    rstd[n] = r;
  }
}

// With xhat = x * r:  dxhat = dy * w;  dx = r * (dxhat - xhat * mean(dxhat * xhat));  dw += dy * xhat.
void rms_norm_bwd_ref(const double* dy, const double* x, const double* w, const double* rstd, double* dx, double* dw,
                      int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const double r = rstd[n];
    double dot = 0;
    for (int64_t c = 0; c < C; c++) dot += dy[n * C + c] * w[c] * x[n * C + c] * r;
    dot /= double(C);
    for (int64_t c = 0; c < C; c++) {
      double xhat = x[n * C + c] * r;
      dx[n * C + c] = r * (dy[n * C + c] * w[c] - xhat * dot);
      dw[c] += dy[n * C + c] * xhat;
    }
  }
}

}  // namespace anvil
