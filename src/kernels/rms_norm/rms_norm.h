// rms_norm: y = x / sqrt(mean(x^2) + eps) * w, over the last dimension.
//
// Shapes:  x, y, dx, dy: (N, C) with N = rows (B*T), C = channels;  w, dw: (C);  rstd: (N) f32.
// Dtypes:  x, y, dx, dy in f32/bf16/f16 (all the same); w in the same dtype as x; rstd and dw in f32.
// Numerics: fp32 accumulation; y is rounded once into its dtype.
// Gradients: dx is overwritten; dw is accumulated into (+=), so micro-batches add up without extra buffers.
#pragma once
#include "core/tensor.h"

namespace anvil {

// Front-ends: check shapes, dtypes, devices; dispatch to CPU or GPU.
void rms_norm_fwd(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd);
void rms_norm_bwd(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw);

// The fp64 reference (the spec). All arrays row-major.
void rms_norm_fwd_ref(const double* x, const double* w, double* y, double* rstd, int64_t N, int64_t C, double eps);
void rms_norm_bwd_ref(const double* dy, const double* x, const double* w, const double* rstd, double* dx, double* dw,
                      int64_t N, int64_t C);

// Backend implementations (arguments already checked).
void rms_norm_fwd_cpu(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd);
void rms_norm_bwd_cpu(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw);
void rms_norm_fwd_gpu(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd);
void rms_norm_bwd_gpu(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw);

}  // namespace anvil
