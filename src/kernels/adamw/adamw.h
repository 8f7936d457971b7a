// adamw: one fused AdamW step over a flat parameter buffer (decoupled weight decay, bias correction).
//
// Shapes:  param, grad, m, v: (n) f32 (master weights and state);  param_out: (n) optional low-precision copy
//          of the updated parameters (bf16/f16) that the forward pass reads, written in the same pass.
// Math:    g = grad * grad_scale (clipping folds into grad_scale);  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//          p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p)   (as torch.optim.AdamW).
//
// The multi-tensor forms serve the optimizer. Mamba-130m has 242 parameter tensors: one sum_squares (2 launches)
// and one adamw_step per tensor made ~1000 of a training step's ~2100 launches, and after the host read the norm
// the GPU idled while the host enqueued them one by one (~18 ms of a 155 ms step on an H200).
//   adamw_step_multi: every tensor of a list in one pass (one launch on the GPU, more only past 8 distinct
//                     weight decays), bit-identical to adamw_step on each tensor.
//   grad_sum_squares_multi: the squared global gradient norm for clipping, two launches on the GPU.
//   zero_multi: zero_grad, one launch on the GPU instead of one memset per tensor.
// On the GPU all three read a table of the tensors (pointers, sizes, block offsets) kept in device memory and
// reused while the list stays the same, so the steady state of a training loop copies nothing to the device.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace anvil {

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  int64_t step = 1;        // 1-based, after increment
  float grad_scale = 1.f;  // multiply gradients first (global-norm clipping)
};

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p,
                Tensor& param_out);  // param_out may be undefined

// One tensor of adamw_step_multi: the buffers and shapes adamw_step takes, and this tensor's weight decay.
struct AdamWTensor {
  Tensor param, grad, m, v;  // f32, one shape, contiguous
  Tensor param_out;          // bf16/f16 of param's shape, or undefined (no compute copy to write)
  float weight_decay = 0.f;  // replaces AdamWParams::weight_decay, which must be 0 for the multi form
};

// adamw_step on every tensor of `ts` with p (p.weight_decay = 0; each tensor has its own). All tensors on one
// device; empty tensors are skipped; the list may not be empty.
void adamw_step_multi(std::vector<AdamWTensor>& ts, const AdamWParams& p);

// out (1) f32 += sum over every x in xs of sum(x^2). xs: f32, contiguous, any shapes, on out's device; the list
// may not be empty. Deterministic (fixed-order partial sums, no atomics); NaN and inf propagate. On the CPU the
// result is bit-identical to sum_squares (kernels/elementwise) on each tensor in order.
void grad_sum_squares_multi(const std::vector<Tensor>& xs, Tensor& out);

// Every tensor of xs set to zero (all bits 0). xs: contiguous, any dtype and shape, all on one device; the list
// may not be empty; empty tensors are skipped.
void zero_multi(const std::vector<Tensor>& xs);

void adamw_step_ref(double* param, const double* grad, double* m, double* v, int64_t n, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int64_t step, double grad_scale);

// out += sum over tensors k and elements i of xs[k][i]^2.
void grad_sum_squares_ref(const std::vector<std::vector<double>>& xs, double* out);

void adamw_step_cpu(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out);
void adamw_step_gpu(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out);
void adamw_step_multi_cpu(std::vector<AdamWTensor>& ts, const AdamWParams& p);
void adamw_step_multi_gpu(std::vector<AdamWTensor>& ts, const AdamWParams& p);
void grad_sum_squares_multi_cpu(const std::vector<Tensor>& xs, Tensor& out);
void grad_sum_squares_multi_gpu(const std::vector<Tensor>& xs, Tensor& out);
void zero_multi_cpu(const std::vector<Tensor>& xs);
void zero_multi_gpu(const std::vector<Tensor>& xs);

}  // namespace anvil
