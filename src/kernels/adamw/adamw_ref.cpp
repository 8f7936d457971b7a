// fp64 references for one AdamW step (torch.optim.AdamW semantics) and the squared global gradient norm,
// written to be read. adamw_step_multi's reference is adamw_step_ref on each tensor.
#include <cmath>

#include "kernels/adamw/adamw.h"

namespace anvil {

void adamw_step_ref(double* param, const double* grad, double* m, double* v, int64_t n, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int64_t step, double grad_scale) {
  const double bc1 = 1 - std::pow(beta1, double(step)), bc2 = 1 - std::pow(beta2, double(step));
  for (int64_t i = 0; i < n; i++) {
    const double g = grad[i] * grad_scale;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    const double mhat = m[i] / bc1, vhat = v[i] / bc2;
    param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * param[i]);
  }
}

void grad_sum_squares_ref(const std::vector<std::vector<double>>& xs, double* out) {
  for (const auto& x : xs)
    for (double v : x) out[0] += v * v;
}

}  // namespace anvil
