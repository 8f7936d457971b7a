// swiglu: out = silu(gate) * up, reading the fused gate/up projection output.
//
// Shapes:  gu (N, 2H): gate = gu[:, :H], up = gu[:, H:] (the model stacks W_gate over W_up into one
//          (2H, C) weight so both come from one GEMM);  out, dout (N, H);  dgu (N, 2H).
// Dtypes:  gu/out f32/bf16/f16 (the same); out may be e4m3fn/e4m3fnuz when out_scale (1) f32 is given.
// Numerics: fp32 math, one rounding on the way out.
// Gradients: dgu is overwritten.
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
