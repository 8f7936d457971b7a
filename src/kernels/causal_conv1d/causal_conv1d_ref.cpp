// fp64 reference for causal_conv1d, written to be read.
#include <cmath>
#include <vector>

#include "kernels/causal_conv1d/causal_conv1d.h"

namespace anvil {

static double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// pre-activation at (row, t): row = b*D + d points at x's channel sequence of length L.
static double pre_at(const double* xr, const double* wd, double b0, int64_t t, int64_t W) {
  double s = b0;
  for (int64_t k = 0; k < W; k++) {
    int64_t src = t - (W - 1) + k;
    if (src >= 0) s += wd[k] * xr[src];
  }
  return s;
}

void causal_conv1d_fwd_ref(const double* x, const double* w, const double* bias, bool silu, double* out,
                           int64_t B, int64_t D, int64_t L, int64_t W) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t d = 0; d < D; d++) {
      const double* xr = x + (b * D + d) * L;
      for (int64_t t = 0; t < L; t++) {
        double p = pre_at(xr, w + d * W, bias ? bias[d] : 0.0, t, W);
        out[(b * D + d) * L + t] = silu ? p * sigmoid(p) : p;
      }
    }
}

// With dpre = dout * silu'(pre) (or dout):  dx[t] = sum_k w[k] * dpre[t+(W-1)-k];
// dw[k] += sum_t dpre[t] * x[t-(W-1)+k];  dbias += sum_t dpre[t].  silu'(p) = s * (1 + p * (1 - s)), s = sigmoid(p).
void causal_conv1d_bwd_ref(const double* dout, const double* x, const double* w, const double* bias, bool silu,
                           double* dx, double* dw, double* dbias, int64_t B, int64_t D, int64_t L, int64_t W) {
  std::vector<double> dpre(static_cast<size_t>(L));
  for (int64_t b = 0; b < B; b++)
    for (int64_t d = 0; d < D; d++) {
      const int64_t row = (b * D + d) * L;
      const double* xr = x + row;
      for (int64_t t = 0; t < L; t++) {
        double g = dout[row + t];
        if (silu) {
          double p = pre_at(xr, w + d * W, bias ? bias[d] : 0.0, t, W), s = sigmoid(p);
          g *= s * (1 + p * (1 - s));
        }
        dpre[size_t(t)] = g;
      }
      for (int64_t t = 0; t < L; t++) {
        double s = 0;
        for (int64_t k = 0; k < W; k++) {
          int64_t dst = t + (W - 1) - k;
          if (dst < L) s += w[d * W + k] * dpre[size_t(dst)];
        }
        dx[row + t] = s;
      }
      for (int64_t t = 0; t < L; t++) {
        for (int64_t k = 0; k < W; k++) {
          int64_t src = t - (W - 1) + k;
          if (src >= 0) dw[d * W + k] += dpre[size_t(t)] * xr[src];
        }
        if (dbias) dbias[d] += dpre[size_t(t)];
      }
    }
}

void causal_conv1d_update_ref(const double* x, double* conv_state, const double* w, const double* bias, bool silu,
                              double* out, int64_t B, int64_t D, int64_t W) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t d = 0; d < D; d++) {
      double* st = conv_state + (b * D + d) * (W - 1);
      double p = bias ? bias[d] : 0.0;
      for (int64_t k = 0; k < W - 1; k++) p += w[d * W + k] * st[k];
      p += w[d * W + W - 1] * x[b * D + d];
      out[b * D + d] = silu ? p * sigmoid(p) : p;
      for (int64_t k = 0; k + 1 < W - 1; k++) st[k] = st[k + 1];
      st[W - 2] = x[b * D + d];
    }
}

}  // namespace anvil
