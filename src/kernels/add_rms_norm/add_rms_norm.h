// add_rms_norm: the residual stream's fused step.  h = a + b;  y = rms_norm(h) * w.
// In decode the residual is updated in place (h may be the same tensor as a or b), and y may be FP8 with a
// per-tensor scale so the next GEMM reads one byte per element.
//
// Shapes:  a, b, h, y, dy, dh_in, dh: (N, C);  w: (C);  rstd: (N) f32;  dw: (C) f32;  y_scale: (1) f32.
// Dtypes:  a, b, h, w, dy, dh_in, dh in f32/bf16/f16 (the same); y in that dtype, or e4m3fn/e4m3fnuz when
//          y_scale is given: y = sat_round(norm * w / y_scale), the division done as a multiplication by the
//          f32 reciprocal. y_scale lives on a's device and must be > 0 (the GPU kernel reads it: not checked).
// Numerics: fp32 accumulation; h is rounded once into its dtype and the norm is computed from the rounded h
//          (what an unfused add followed by rms_norm computes), so rstd and the backward see exactly the h
//          that was stored.
// Gradients: dh = dh_in + d(rms_norm)/dh · dy  (dh_in is the gradient arriving along the residual; may be
//          undefined, meaning zero; dh may be dh_in itself);  da = db = dh, so one output serves both.
//          dw is accumulated (+=). The rms_norm part is rms_norm_bwd's math with x = h.
#pragma once
#include "core/tensor.h"

namespace anvil {

void add_rms_norm_fwd(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                      Tensor& rstd, const Tensor& y_scale = Tensor());
void add_rms_norm_bwd(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w, const Tensor& rstd,
                      Tensor& dh, Tensor& dw);

// fp64 reference. h is returned unrounded; the norm is of the h given to it (tests round h into the dtype
// and call rms_norm_fwd_ref on it for y, which is what the contract above says). dh_in may be nullptr.
void add_rms_norm_fwd_ref(const double* a, const double* b, const double* w, double* h, double* y, double* rstd,
                          int64_t N, int64_t C, double eps);
void add_rms_norm_bwd_ref(const double* dy, const double* dh_in, const double* h, const double* w,
                          const double* rstd, double* dh, double* dw, int64_t N, int64_t C);

void add_rms_norm_fwd_cpu(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                          Tensor& rstd, const Tensor& y_scale);
void add_rms_norm_bwd_cpu(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w,
                          const Tensor& rstd, Tensor& dh, Tensor& dw);
void add_rms_norm_fwd_gpu(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                          Tensor& rstd, const Tensor& y_scale);
void add_rms_norm_bwd_gpu(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w,
                          const Tensor& rstd, Tensor& dh, Tensor& dw);

}  // namespace anvil
