// adamw front-end: argument checks and backend dispatch.
#include <cmath>

#include "kernels/adamw/adamw.h"

namespace anvil {

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out) {
  const char* op = "adamw_step";
  check_dtype(op, "param", param, DType::f32);
  check_contiguous(op, "param", param);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"grad", &grad}, {"m", &m}, {"v", &v}}) {
    check_shape(op, name, *t, param.shape());
    check_dtype(op, name, *t, DType::f32);
    check_contiguous(op, name, *t);
    check_same_device(op, param, "param", *t, name);
  }
  if (param_out.defined()) {
    check_shape(op, "param_out", param_out, param.shape());
    check_dtype_in(op, "param_out", param_out, {DType::bf16, DType::f16});
    check_contiguous(op, "param_out", param_out);
    check_same_device(op, param, "param", param_out, "param_out");
  }
  ANVIL_CHECK(p.step >= 1, op, "step >= 1 (1-based, after increment)", p.step);
  ANVIL_CHECK(std::isfinite(p.lr) && p.lr >= 0, op, "a finite lr >= 0", p.lr);
  ANVIL_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op, "beta1 and beta2 in [0, 1)",
              str(p.beta1, ", ", p.beta2));
  ANVIL_CHECK(std::isfinite(p.eps) && p.eps >= 0, op, "a finite eps >= 0", p.eps);
  ANVIL_CHECK(std::isfinite(p.weight_decay) && p.weight_decay >= 0, op, "a finite weight_decay >= 0", p.weight_decay);
  ANVIL_CHECK(std::isfinite(p.grad_scale), op, "a finite grad_scale", p.grad_scale);
  if (param.numel() == 0) return;
  if (param.device().is_cpu()) return adamw_step_cpu(param, grad, m, v, p, param_out);
#ifdef ANVIL_HAS_GPU
  return adamw_step_gpu(param, grad, m, v, p, param_out);
#endif
}

}  // namespace anvil
