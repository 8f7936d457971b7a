// The per-element AdamW update shared by the CPU and GPU versions, with the step's scalars folded on the host
// (in double) so the element loop does 2 FMAs, a sqrt and a divide more than the plain moment updates.
#pragma once
#include <cmath>

#include "core/dtype.h"
#include "kernels/adamw/adamw.h"

namespace anvil {

struct AdamWScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale;
  float decay;         // 1 - lr * weight_decay: decoupled decay applied to the old parameter
  float step_size;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
};

inline AdamWScalars adamw_scalars(const AdamWParams& p) {
  const double bc1 = 1 - std::pow(double(p.beta1), double(p.step));
  const double bc2 = 1 - std::pow(double(p.beta2), double(p.step));
  return {p.beta1, p.beta2, float(1 - double(p.beta1)), float(1 - double(p.beta2)), p.eps, p.grad_scale,
          float(1 - double(p.lr) * p.weight_decay), float(p.lr / bc1), float(1 / std::sqrt(bc2))};
}

// p = p (1 - lr wd) - lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), as torch's AdamW orders it.
ANVIL_HD void adamw_update(const AdamWScalars& s, float& p, float g, float& m, float& v) {
  g *= s.grad_scale;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  p = p * s.decay - s.step_size * m / (sqrtf(v) * s.inv_sqrt_bc2 + s.eps);
}

}  // namespace anvil
