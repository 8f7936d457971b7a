// Internal to the selective-scan GPU sources: which kernel variant runs, and the entry points of the kernels
// that live in their own files. Not part of the op's contract (selective_scan.h is).
#pragma once
#include "core/tensor.h"

namespace anvil {

// ANVIL_SCAN_VARIANT, read once per process (docs/mamba_kernels.md lists the variants; scripts/ssm_bench.sh
// times each). 0 is the warp-per-channel scan of selective_scan.cu; a variant whose kernel does not take the
// call's shape (N > 16) falls back to it.
int selective_scan_variant();

// Forward with one thread per (channel, S states), sequential in time (selective_scan_fwd_seq.cu).
// Returns false, doing nothing, when `variant` does not name one of its configurations or N > 16.
bool selective_scan_fwd_seq_gpu(int variant, const Tensor& u, const Tensor& delta, const Tensor& A,
                                const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                                const Tensor& delta_bias, bool delta_softplus, Tensor& out, Tensor& states);

// ANVIL_SCAN_BWD_VARIANT, read once per process: 0 the warp-per-channel backward (selective_scan_bwd_warp.cu),
// 2 the sequential schedule with cp.async staging and 16-byte output packs (selective_scan_bwd_async.cu), 3 the
// same kernel with per-round recompute and the adjoint's inputs held in registers, 4 (default) = 3 with the dB/dC
// channel sums pre-summed per warp by shuffles. 2-4 take N <= 16; other N, and other values (1 was the first sequential
// kernel, removed), run 0.
int selective_scan_bwd_variant();

// dB and dC sum over the D/G channels of a group by f32 atomics: the accumulators are dB/dC themselves when they
// are f32, else zeroed f32 temporaries that finish() rounds once into them. Shared by the backward kernels.
struct ScanGradAccum {
  Tensor dB, dC;  // f32, zeroed
  ScanGradAccum(const Tensor& dB_out, const Tensor& dC_out);
  void finish(Tensor& dB_out, Tensor& dC_out) const;  // no-op when the outputs are f32
};

// Returns false, doing nothing, when `variant` is not 2 or 3, or N > 16.
bool selective_scan_bwd_async_gpu(int variant, const Tensor& dout, const Tensor& u, const Tensor& delta,
                                  const Tensor& A, const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip,
                                  const Tensor& z, const Tensor& delta_bias, bool delta_softplus,
                                  const Tensor& states, Tensor& du, Tensor& ddelta, Tensor& dA, Tensor& dB,
                                  Tensor& dC, Tensor& dD, Tensor& dz, Tensor& ddelta_bias, Tensor& out);

}  // namespace anvil
