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
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  // Device code spells out every rounding (fmaf, and anvil_mul_rn for products that must not fuse): the
  // compiler contracted `a * b + c` differently in the per-tensor and the multi-tensor kernels that inline this
  // function, and their results differed in the last bit on the H200. Division and sqrt are IEEE (no fast math).
  g = anvil_mul_rn(g, s.grad_scale);
  m = fmaf(s.beta1, m, anvil_mul_rn(s.one_minus_beta1, g));
  v = fmaf(s.beta2, v, anvil_mul_rn(anvil_mul_rn(s.one_minus_beta2, g), g));
  p = fmaf(p, s.decay, -(anvil_mul_rn(s.step_size, m) / fmaf(sqrtf(v), s.inv_sqrt_bc2, s.eps)));
#else
  g *= s.grad_scale;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  p = p * s.decay - s.step_size * m / (sqrtf(v) * s.inv_sqrt_bc2 + s.eps);
#endif
}

}  // namespace anvil
