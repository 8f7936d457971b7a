// selective_scan: Mamba-1's selective state-space scan, with mamba_ssm's selective_scan_fn semantics.
//
// For each batch b, channel d (in group g = d / (D/G)), state n, time t:
//   dt[t]   = delta[b,d,t] + delta_bias[d];  dt = softplus(dt) if delta_softplus (log1p(exp(x)), x for x > 20)
//   h[n]    = exp(dt[t] * A[d,n]) * h[n] + dt[t] * Bm[b,g,n,t] * u[b,d,t]          (h = 0 before t = 0)
//   y[t]    = sum_n Cm[b,g,n,t] * h[n] + D_skip[d] * u[b,d,t]
//   out     = z ? y * silu(z[b,d,t]) : y
//
// Shapes (channel-major, like causal_conv1d: each channel's sequence contiguous):
//   u, delta, z, out, du, ddelta, dz, dout: (B, D, L);  A, dA: (D, N);  Bm, Cm, dB, dC: (B, G, N, L), G | D;
//   D_skip, dD, delta_bias, ddelta_bias: (D);  states: (B, D, selective_scan_states(L, N), N);  1 <= N <= 256.
//   The backward's dz and out may instead be stored in (D, B, L) order (transpose(0, 1) of a contiguous (D, B, L)
//   buffer): out_proj's and in_proj's weight gradients then read them as (D, B * L), one product each.
// Dtypes:  u, delta, Bm, Cm, z, out and every gradient of them in one of f32/bf16/f16 (the same);
//          A, D_skip, delta_bias, states, dA, dD, ddelta_bias in f32. A is real (Mamba-1).
// Optional inputs (D_skip, z, delta_bias) are undefined tensors (Tensor()) when absent; their gradients must
//   then be undefined too, and may be undefined when present (no gradient wanted).
// Numerics: fp32 state and accumulation, each output rounded once into its dtype.
//
// Saved states: the forward writes states[b,d,k,:] = h after step (k+1)*E - 1 (or after the last step, L-1, for
//   the last k), E = selective_scan_state_every(N); so states[..., last, :] is the final state that generation
//   continues from. The backward recomputes the forward between saved states, so nothing of size L*N is stored.
//   E = 32 for N <= 16 (Mamba-1's 16): the sequential GPU backward then starts every 32-step tile from a saved
//   state instead of first re-running each 512-step chunk forward to find them (that pass was ~15% of its
//   instructions); the states cost 4*N*D bytes per 32 tokens (B=8, D=2048, L=2048: 67 MB per layer). E = 512
//   above N = 16, where only the warp-per-channel kernels run (one warp pass is a 512-step chunk) and 16x the
//   states would be 2 KB per channel and 32 tokens at N = 256.
// Gradients: du, ddelta, dB, dC, dz are overwritten; dA, dD, ddelta_bias are accumulated into (+=).
//   dz is written only when z is given (then it is required); it needs y, which the backward recomputes.
//   out (optional, the last argument): the backward also writes the forward's output there, from the same
//   recomputation. A training step then need not keep out between its forward and its backward: out_proj's
//   weight gradient is taken after the scan's backward (B·D·L elements less per layer: 14% of a Mamba layer's
//   saved activations, 22% of the slim set kept under recompute). The CPU backward computes it as the CPU
//   forward does, to the bit; the GPU backward adds the states in another order than the GPU forward (f32
//   rounding, before the output's).
//
// Decode (one token per sequence): state (B, D, N) f32 updated in place;  x, dt, z, out: (B, D) one dtype;
//   Bm, Cm: (B, G, N) in x's dtype;  A (D, N), D_skip (D), dt_bias (D) f32 — the same recurrence for one t.
#pragma once
#include "core/tensor.h"

namespace anvil {

constexpr int64_t kSelectiveScanChunk = 512;    // steps per pass of the warp-per-channel GPU kernels
constexpr int64_t kSelectiveScanTileEvery = 32;  // state interval for N <= kSelectiveScanTileMaxN
constexpr int64_t kSelectiveScanTileMaxN = 16;
constexpr int64_t kSelectiveScanMaxN = 256;
inline int64_t selective_scan_state_every(int64_t N) {
  return N <= kSelectiveScanTileMaxN ? kSelectiveScanTileEvery : kSelectiveScanChunk;
}
// Saved states per (b, d): one per E steps, the last one after step L-1.
inline int64_t selective_scan_states(int64_t L, int64_t N) {
  const int64_t e = selective_scan_state_every(N);
  return (L + e - 1) / e;
}

void selective_scan_fwd(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                        const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias, bool delta_softplus,
                        Tensor& out, Tensor& states);
void selective_scan_bwd(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                        const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                        bool delta_softplus, const Tensor& states, Tensor& du, Tensor& ddelta, Tensor& dA,
                        Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz, Tensor& ddelta_bias, Tensor* out = nullptr);
void selective_state_update(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                            bool dt_softplus, Tensor& out);

// Batch and channel strides (elements) of a (B, D, L) output in either row order check_rows_bdl_or_dbl allows;
// those of `like` (contiguous) when t is undefined. at(b, d): where row (b, d) starts.
struct RowStrides {
  int64_t b, d;
  ANVIL_HD int64_t at(int64_t bi, int64_t di) const { return bi * b + di * d; }
};
inline RowStrides row_strides(const Tensor& t, const Tensor& like) {
  const Tensor& s = t.defined() ? t : like;
  return {s.stride(0), s.stride(1)};
}

// Sizes of one call, shared by the reference and the backends.
struct ScanDims {
  int64_t B, D, L, N, G;
};

// The fp64 reference (the spec). Optional inputs are nullptr when absent; so are the gradients not wanted.
// states may be nullptr. The backward recomputes everything from the inputs (it is the spec, not fast).
void selective_scan_fwd_ref(const double* u, const double* delta, const double* A, const double* Bm,
                            const double* Cm, const double* D_skip, const double* z, const double* delta_bias,
                            bool delta_softplus, double* out, double* states, ScanDims s);
void selective_scan_bwd_ref(const double* dout, const double* u, const double* delta, const double* A,
                            const double* Bm, const double* Cm, const double* D_skip, const double* z,
                            const double* delta_bias, bool delta_softplus, double* du, double* ddelta, double* dA,
                            double* dB, double* dC, double* dD, double* dz, double* ddelta_bias, ScanDims s);
// One decode step; s.L is ignored. state (B, D, N) in place; x, dt, z, out (B, D); Bm, Cm (B, G, N).
void selective_state_update_ref(double* state, const double* x, const double* dt, const double* A, const double* Bm,
                                const double* Cm, const double* D_skip, const double* z, const double* dt_bias,
                                bool dt_softplus, double* out, ScanDims s);

// Backend implementations (arguments already checked; undefined tensors mean absent, or not wanted).
void selective_scan_fwd_cpu(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                            bool delta_softplus, Tensor& out, Tensor& states);
void selective_scan_bwd_cpu(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus, const Tensor& states, Tensor& du,
                            Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz,
                            Tensor& ddelta_bias, Tensor& out);
void selective_state_update_cpu(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                                const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                                bool dt_softplus, Tensor& out);
void selective_scan_fwd_gpu(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                            bool delta_softplus, Tensor& out, Tensor& states);
void selective_scan_bwd_gpu(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus, const Tensor& states, Tensor& du,
                            Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz,
                            Tensor& ddelta_bias, Tensor& out);
void selective_state_update_gpu(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                                const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                                bool dt_softplus, Tensor& out);

}  // namespace anvil
