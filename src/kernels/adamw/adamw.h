// adamw: one fused AdamW step over a flat parameter buffer (decoupled weight decay, bias correction).
//
// Shapes:  param, grad, m, v: (n) f32 (master weights and state);  param_out: (n) optional low-precision copy
//          of the updated parameters (bf16/f16) that the forward pass reads, written in the same pass.
// Math:    g = grad * grad_scale (clipping folds into grad_scale);  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//          p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p)   (as torch.optim.AdamW).
#pragma once
#include "core/tensor.h"

namespace anvil {

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  int64_t step = 1;        // 1-based, after increment
  float grad_scale = 1.f;  // multiply gradients first (global-norm clipping)
};

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p,
                Tensor& param_out);  // param_out may be undefined

void adamw_step_ref(double* param, const double* grad, double* m, double* v, int64_t n, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int64_t step, double grad_scale);

void adamw_step_cpu(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out);
void adamw_step_gpu(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out);

}  // namespace anvil
