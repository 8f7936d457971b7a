// swiglu: out = silu(gate) * up, reading the fused gate/up projection output.  silu(g) = g * sigmoid(g).
//
// Shapes:  gu, dgu (N, 2H): gate = gu[:, :H], up = gu[:, H:] (the model stacks W_gate over W_up into one
//          (2H, C) weight so both come from one GEMM);  out, dout (N, H);  out_scale (1) f32.
// Dtypes:  gu, dgu, dout f32/bf16/f16 (the same); out in gu's dtype, or e4m3fn/e4m3fnuz when out_scale is
//          given: out = sat_round(silu(g) * u / out_scale), so the down projection reads one byte per element.
//          out_scale lives on gu's device and must be > 0 (read by the kernel: not checked on GPU).
// Numerics: fp32 math, one rounding on the way out (the division by out_scale is a multiplication by its
//          f32 reciprocal).
// Gradients: with s = sigmoid(g):  dgate = dout * u * s * (1 + g * (1 - s));  dup = dout * g * s.
//          dgu is overwritten; it may be gu itself (each (gate, up) pair is read before it is written),
//          which saves an (N, 2H) buffer when the activation is not needed after the backward.
#pragma once
#include "core/tensor.h"

namespace anvil {

void swiglu_fwd(const Tensor& gu, Tensor& out, const Tensor& out_scale = Tensor());
void swiglu_bwd(const Tensor& dout, const Tensor& gu, Tensor& dgu);

void swiglu_fwd_ref(const double* gu, double* out, int64_t N, int64_t H);
void swiglu_bwd_ref(const double* dout, const double* gu, double* dgu, int64_t N, int64_t H);

void swiglu_fwd_cpu(const Tensor& gu, Tensor& out, const Tensor& out_scale);
void swiglu_bwd_cpu(const Tensor& dout, const Tensor& gu, Tensor& dgu);
void swiglu_fwd_gpu(const Tensor& gu, Tensor& out, const Tensor& out_scale);
void swiglu_bwd_gpu(const Tensor& dout, const Tensor& gu, Tensor& dgu);

}  // namespace anvil
