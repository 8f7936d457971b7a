// fp64 reference for selective_scan, written to be read: one channel at a time, one step at a time.
#include <cmath>
#include <vector>

#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }
double softplus_grad(double v) { return v > 20.0 ? 1.0 : sigmoid(v); }
double silu(double v) { return v * sigmoid(v); }
double silu_grad(double v) {
  double s = sigmoid(v);
  return s * (1.0 + v * (1.0 - s));
}

// The step sizes of channel (b, d): raw = delta + delta_bias, dt = softplus(raw) or raw.
void step_sizes(const double* delta_row, const double* delta_bias, bool sp, int64_t d, int64_t L, double* raw,
                double* dt) {
  for (int64_t t = 0; t < L; t++) {
    raw[t] = delta_row[t] + (delta_bias ? delta_bias[d] : 0.0);
    dt[t] = sp ? softplus(raw[t]) : raw[t];
  }
}

}  // namespace

void selective_scan_fwd_ref(const double* u, const double* delta, const double* A, const double* Bm,
                            const double* Cm, const double* D_skip, const double* z, const double* delta_bias,
                            bool delta_softplus, double* out, double* states, ScanDims s) {
  const int64_t L = s.L, N = s.N, per_group = s.D / s.G, nc = selective_scan_states(L, N),
                every = selective_scan_state_every(N);
  std::vector<double> raw(static_cast<size_t>(L)), dt(static_cast<size_t>(L)), h(static_cast<size_t>(N));
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t d = 0; d < s.D; d++) {
      const int64_t row = (b * s.D + d) * L, g = d / per_group;
      const double* Bg = Bm + (b * s.G + g) * N * L;  // (N, L) of this batch and group
      const double* Cg = Cm + (b * s.G + g) * N * L;
      step_sizes(delta + row, delta_bias, delta_softplus, d, L, raw.data(), dt.data());
      std::fill(h.begin(), h.end(), 0.0);
      for (int64_t t = 0; t < L; t++) {
        double y = 0;
        for (int64_t n = 0; n < N; n++) {
          h[n] = std::exp(dt[t] * A[d * N + n]) * h[n] + dt[t] * Bg[n * L + t] * u[row + t];
          y += Cg[n * L + t] * h[n];
        }
        if (D_skip) y += D_skip[d] * u[row + t];
        out[row + t] = z ? y * silu(z[row + t]) : y;
        const bool saved = (t + 1) % every == 0 || t + 1 == L;
        if (states && saved)
          for (int64_t n = 0; n < N; n++) states[((b * s.D + d) * nc + t / every) * N + n] = h[n];
      }
    }
}

// Backward by reverse-mode through the recurrence. With G_t = dL/dh_t (all paths):
//   G_t = dy_t * C_t + a_{t+1} * G_{t+1};   dC_t += dy_t h_t;   dB_t += G_t dt_t u_t;   du_t += G_t dt_t B_t;
//   ddt_t += G_t (u_t B_t + A h_{t-1} a_t);  dA += G_t h_{t-1} a_t dt_t;  ddelta = ddt * softplus'(raw).
void selective_scan_bwd_ref(const double* dout, const double* u, const double* delta, const double* A,
                            const double* Bm, const double* Cm, const double* D_skip, const double* z,
                            const double* delta_bias, bool delta_softplus, double* du, double* ddelta, double* dA,
                            double* dB, double* dC, double* dD, double* dz, double* ddelta_bias, ScanDims s) {
  const int64_t L = s.L, N = s.N, per_group = s.D / s.G;
  std::fill(dB, dB + s.B * s.G * N * L, 0.0);
  std::fill(dC, dC + s.B * s.G * N * L, 0.0);
  std::vector<double> raw(static_cast<size_t>(L)), dt(static_cast<size_t>(L)), dy(static_cast<size_t>(L));
  std::vector<double> h(static_cast<size_t>(L * N)), q(static_cast<size_t>(N));
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t d = 0; d < s.D; d++) {
      const int64_t row = (b * s.D + d) * L, g = d / per_group;
      const double* Bg = Bm + (b * s.G + g) * N * L;
      const double* Cg = Cm + (b * s.G + g) * N * L;
      double* dBg = dB + (b * s.G + g) * N * L;
      double* dCg = dC + (b * s.G + g) * N * L;
      step_sizes(delta + row, delta_bias, delta_softplus, d, L, raw.data(), dt.data());
      // Forward again, keeping every state.
      for (int64_t t = 0; t < L; t++) {
        double y = 0;
        for (int64_t n = 0; n < N; n++) {
          const double prev = t > 0 ? h[(t - 1) * N + n] : 0.0;
          h[t * N + n] = std::exp(dt[t] * A[d * N + n]) * prev + dt[t] * Bg[n * L + t] * u[row + t];
          y += Cg[n * L + t] * h[t * N + n];
        }
        if (D_skip) y += D_skip[d] * u[row + t];
        dy[t] = dout[row + t];
        if (z) {
          if (dz) dz[row + t] = dout[row + t] * y * silu_grad(z[row + t]);
          dy[t] = dout[row + t] * silu(z[row + t]);
        }
      }
      std::fill(q.begin(), q.end(), 0.0);  // q[n] = a_{t+1} G_{t+1}: what later steps send back to h_t
      for (int64_t t = L - 1; t >= 0; t--) {
        double ddt = 0, dut = D_skip ? dy[t] * D_skip[d] : 0.0;
        if (D_skip && dD) dD[d] += dy[t] * u[row + t];
        for (int64_t n = 0; n < N; n++) {
          const double a = std::exp(dt[t] * A[d * N + n]), prev = t > 0 ? h[(t - 1) * N + n] : 0.0;
          const double Gt = dy[t] * Cg[n * L + t] + q[n];
          dCg[n * L + t] += dy[t] * h[t * N + n];
          dBg[n * L + t] += Gt * dt[t] * u[row + t];
          dut += Gt * dt[t] * Bg[n * L + t];
          ddt += Gt * (u[row + t] * Bg[n * L + t] + A[d * N + n] * prev * a);
          dA[d * N + n] += Gt * prev * a * dt[t];
          q[n] = Gt * a;
        }
        du[row + t] = dut;
        ddelta[row + t] = delta_softplus ? ddt * softplus_grad(raw[t]) : ddt;
        if (delta_bias && ddelta_bias) ddelta_bias[d] += ddelta[row + t];
      }
    }
}

void selective_state_update_ref(double* state, const double* x, const double* dt, const double* A, const double* Bm,
                                const double* Cm, const double* D_skip, const double* z, const double* dt_bias,
                                bool dt_softplus, double* out, ScanDims s) {
  const int64_t N = s.N, per_group = s.D / s.G;
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t d = 0; d < s.D; d++) {
      const int64_t i = b * s.D + d, g = d / per_group;
      double step = dt[i] + (dt_bias ? dt_bias[d] : 0.0);
      if (dt_softplus) step = softplus(step);
      double y = 0;
      for (int64_t n = 0; n < N; n++) {
        double& h = state[i * N + n];
        h = std::exp(step * A[d * N + n]) * h + step * Bm[(b * s.G + g) * N + n] * x[i];
        y += Cm[(b * s.G + g) * N + n] * h;
      }
      if (D_skip) y += D_skip[d] * x[i];
      out[i] = z ? y * silu(z[i]) : y;
    }
}

}  // namespace anvil
