// fp64 reference for causal GQA attention, written to be read: full softmax rows, no tiling.
#include <cmath>
#include <vector>

#include "kernels/attention/attention.h"

namespace anvil {

// Element (b, t, head, d) of a (B, T, H, HD) array.
static inline int64_t at(int64_t b, int64_t t, int64_t head, int64_t d, int64_t T, int64_t H, int64_t HD) {
  return ((b * T + t) * H + head) * HD + d;
}

// p[j] = softmax_j(scale * q_i . k_j) over j <= i; returns the log-sum-exp of the row.
static double softmax_row(const double* q, const double* k, std::vector<double>& p, int64_t b, int64_t i,
                          int64_t h, int64_t kvh, int64_t T, int64_t NH, int64_t NKV, int64_t HD, double scale) {
  double mx = -INFINITY;
  for (int64_t j = 0; j <= i; j++) {
    double s = 0;
    for (int64_t d = 0; d < HD; d++) s += q[at(b, i, h, d, T, NH, HD)] * k[at(b, j, kvh, d, T, NKV, HD)];
    p[j] = s * scale;
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j <= i; j++) sum += std::exp(p[j] - mx);
  const double lse = mx + std::log(sum);
  for (int64_t j = 0; j <= i; j++) p[j] = std::exp(p[j] - lse);
  return lse;
}

void attention_fwd_ref(const double* q, const double* k, const double* v, double* out, double* lse, int64_t B,
                       int64_t T, int64_t NH, int64_t NKV, int64_t HD, double scale) {
  std::vector<double> p(T);
  const int64_t group = NH / NKV;  // query heads per kv head
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < T; i++) {
        const int64_t kvh = h / group;
        lse[(b * NH + h) * T + i] = softmax_row(q, k, p, b, i, h, kvh, T, NH, NKV, HD, scale);
        for (int64_t d = 0; d < HD; d++) {
          double o = 0;
          for (int64_t j = 0; j <= i; j++) o += p[j] * v[at(b, j, kvh, d, T, NKV, HD)];
          out[at(b, i, h, d, T, NH, HD)] = o;
        }
      }
}

// With P the softmax rows, O = P V and S = scale * Q K^T:
//   dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale * dS K;  dK = scale * dS^T Q.
// rowsum(P * dP) equals rowsum(dO * O), which is what the fast backends compute.
void attention_bwd_ref(const double* dout, const double* q, const double* k, const double* v, double* dq,
                       double* dk, double* dv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD,
                       double scale) {
  for (int64_t i = 0; i < B * T * NH * HD; i++) dq[i] = 0;
  for (int64_t i = 0; i < B * T * NKV * HD; i++) dk[i] = dv[i] = 0;
  std::vector<double> p(T), dp(T);
  const int64_t group = NH / NKV;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < T; i++) {
        const int64_t kvh = h / group;
        softmax_row(q, k, p, b, i, h, kvh, T, NH, NKV, HD, scale);
        double D = 0;
        for (int64_t j = 0; j <= i; j++) {
          dp[j] = 0;
          for (int64_t d = 0; d < HD; d++) dp[j] += dout[at(b, i, h, d, T, NH, HD)] * v[at(b, j, kvh, d, T, NKV, HD)];
          D += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= i; j++) {
          const double ds = p[j] * (dp[j] - D);
          for (int64_t d = 0; d < HD; d++) {
            dq[at(b, i, h, d, T, NH, HD)] += scale * ds * k[at(b, j, kvh, d, T, NKV, HD)];
            dk[at(b, j, kvh, d, T, NKV, HD)] += scale * ds * q[at(b, i, h, d, T, NH, HD)];
            dv[at(b, j, kvh, d, T, NKV, HD)] += p[j] * dout[at(b, i, h, d, T, NH, HD)];
          }
        }
      }
}

}  // namespace anvil
