// fp64 reference for the LM-head cross-entropy, written to be read: the full logits row, no chunks.
#include <cmath>
#include <vector>

#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil {

// logits[v] = h_n . w_v over the whole vocabulary; returns their log-sum-exp.
static double logits_row(const double* hn, const double* w, std::vector<double>& logits, int64_t V, int64_t C) {
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; v++) {
    double z = 0;
    for (int64_t c = 0; c < C; c++) z += hn[c] * w[v * C + c];
    logits[v] = z;
    mx = std::max(mx, z);
  }
  double sum = 0;
  for (int64_t v = 0; v < V; v++) sum += std::exp(logits[v] - mx);
  return mx + std::log(sum);
}

void cross_entropy_fwd_ref(const double* h, const double* w, const int32_t* targets, double* loss, double* lse,
                           int64_t N, int64_t V, int64_t C) {
  std::vector<double> logits(V);
  for (int64_t n = 0; n < N; n++) {
    lse[n] = logits_row(h + n * C, w, logits, V, C);
    loss[n] = targets[n] < 0 ? 0.0 : lse[n] - logits[targets[n]];
  }
}

// dlogits_v = dloss * (softmax_v - [v == target]);  dh_n = sum_v dlogits_v w_v;  dw_v += dlogits_v h_n.
void cross_entropy_bwd_ref(const double* dloss, const double* h, const double* w, const int32_t* targets,
                           double* dh, double* dw, int64_t N, int64_t V, int64_t C) {
  std::vector<double> logits(V);
  for (int64_t n = 0; n < N; n++) {
    for (int64_t c = 0; c < C; c++) dh[n * C + c] = 0;
    if (targets[n] < 0) continue;  // ignored position: no gradient
    const double lse = logits_row(h + n * C, w, logits, V, C);
    for (int64_t v = 0; v < V; v++) {
      const double g = dloss[n] * (std::exp(logits[v] - lse) - (v == targets[n] ? 1.0 : 0.0));
      for (int64_t c = 0; c < C; c++) {
        dh[n * C + c] += g * w[v * C + c];
        dw[v * C + c] += g * h[n * C + c];
      }
    }
  }
}

}  // namespace anvil
