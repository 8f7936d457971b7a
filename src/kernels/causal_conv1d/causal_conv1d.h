// causal_conv1d: depthwise causal convolution over time (Mamba's short conv), optional bias, optional SiLU.
//
//   pre[b,d,t] = bias[d] + sum_{k=0..W-1} w[d,k] * x[b,d,t-(W-1)+k]     (x[b,d,t<0] = 0)
//   out[b,d,t] = silu ? pre * sigmoid(pre) : pre
// This is PyTorch's conv1d(x, w (D,1,W), bias, padding=W-1, groups=D)[..., :L] (HF MambaMixer.conv1d).
//
// Layout (decided for the whole Mamba path): channel-major, like mamba_ssm and causal_conv1d —
//   x, out, dx, dout: (B, D, L), contiguous: each channel's sequence is contiguous, so the conv and the
//   selective scan read runs of consecutive timesteps with 16-byte loads. dx may instead be stored in (D, B, L)
//   order (the transpose(0, 1) view of a contiguous (D, B, L) buffer): the Mamba backward then takes in_proj's
//   weight gradient from it as one product with K = B * L.
//   w, dw: (D, W) f32 (HF's conv1d.weight (D, 1, W) viewed as (D, W));  bias, dbias: (D) f32.
//   W in {2, 3, 4}; anything else is an error (the GPU unrolls over W).
// Dtypes:  x, out, dout, dx in f32/bf16/f16 (all the same); w, bias, dw, dbias f32 (tiny: D*W values).
// Numerics: fp32 accumulation, out rounded once into its dtype.
// Gradients: dx is overwritten; dw and dbias are accumulated into (+=). With silu the backward recomputes the
//   pre-activation from x (nothing but x is saved). bias/dbias may be undefined (Tensor()) for "no bias".
//
// Decode step (one new token per sequence):
//   x (B, D), out (B, D) in the same dtype;  conv_state (B, D, W-1) in x's dtype, the last W-1 inputs, oldest
//   first. out = act(bias + sum_k w[d,k] * window[k]) with window = [conv_state..., x]; then conv_state is
//   rolled in place to window[1..W-1]. After a prefill of length L >= W-1, conv_state = x[:, :, L-W+1 : L].
#pragma once
#include "core/tensor.h"

namespace anvil {

void causal_conv1d_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out);
void causal_conv1d_bwd(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                       Tensor& dx, Tensor& dw, Tensor& dbias);
void causal_conv1d_update(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                          Tensor& out);

// The fp64 reference (the spec). bias/dbias may be nullptr. x, out, dout, dx: (B, D, L); w, dw: (D, W).
void causal_conv1d_fwd_ref(const double* x, const double* w, const double* bias, bool silu, double* out,
                           int64_t B, int64_t D, int64_t L, int64_t W);
void causal_conv1d_bwd_ref(const double* dout, const double* x, const double* w, const double* bias, bool silu,
                           double* dx, double* dw, double* dbias, int64_t B, int64_t D, int64_t L, int64_t W);
// x, out: (B, D); conv_state: (B, D, W-1), updated in place.
void causal_conv1d_update_ref(const double* x, double* conv_state, const double* w, const double* bias, bool silu,
                              double* out, int64_t B, int64_t D, int64_t W);

// Backend implementations (arguments already checked; undefined bias/dbias mean none).
void causal_conv1d_fwd_cpu(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out);
void causal_conv1d_bwd_cpu(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                           Tensor& dx, Tensor& dw, Tensor& dbias);
void causal_conv1d_update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                              Tensor& out);
void causal_conv1d_fwd_gpu(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out);
void causal_conv1d_bwd_gpu(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                           Tensor& dx, Tensor& dw, Tensor& dbias);
void causal_conv1d_update_gpu(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                              Tensor& out);

}  // namespace anvil
