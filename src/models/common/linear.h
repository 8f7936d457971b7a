// The inference linear layer y = x @ (w_scale * w)^T for a 16/32-bit weight or an FP8 weight with f32 scales.
//
// Vocabulary: N rows (B*T tokens), C input features, OC output features.
// Shapes:  x (N, C) or (B, T, C); w (OC, C) (Hugging Face nn.Linear layout); y (N, OC) or (B, T, OC).
// Dtypes:  x f32/bf16/f16; w the same dtype as x (16/32-bit), or e4m3fn / e4m3fnuz (FP8) with
//          w_scale f32 (1) per tensor or (OC) per output channel, and an optional static input_scale f32 (1);
//          y x's dtype or f32.
// Paths (FP8):
//   N <= kSkinnyMaxRows (decode), or up to kSkinnyWideRows where skinny_gemm_wide holds (sm_90, e4m3fn): skinny_gemm,
//     weight-only FP8 (the e4m3 codes are decoded in registers, x stays 16/32-bit; a static input_scale is not
//     applied: x is not quantised). Bound by weight bytes: 1 byte/weight.
//   More rows (prefill, big decode batches): x is quantised to e4m3 — per tensor with the static
//     input_scale when the checkpoint has one, else per token (dynamic, amax/fp8_max per row) — then matmul_fp8
//     (cuBLASLt FP8 on sm_89+; the tiled kernel decodes both operands in shared memory on GPUs without FP8
//     arithmetic, e.g. A100/MI250: the stated fallback). Dynamic rows pass their scales to matmul_fp8 as a
//     vector, which both GEMMs apply in their epilogue, rounding once into y (an f16 y through an f32 buffer).
//     CPU: the same two steps (matmul_fp8_cpu decodes to f32 and calls OpenBLAS).
// Numerics: fp32 accumulation; an FP8 weight stands for w_scale * decode(w) exactly.
// Graph capture: no host synchronisation and only stream-ordered temporaries (Tensor::empty), so it can sit in a
//   captured decode step.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {

struct LinearWeight {
  Tensor w;            // (OC, C): 16/32-bit, or e4m3fn / e4m3fnuz
  Tensor w_scale;      // FP8: f32 (1) or (OC); else undefined
  Tensor input_scale;  // FP8, optional: f32 (1) static activation scale; undefined = dynamic per token
  Tensor tiles;        // FP8 on a GPU, optional: w pre-tiled for the skinny GEMM's ring kernel (linear_tile_weights)
  bool is_fp8() const { return w.defined() && dtype_is_fp8(w.dtype()); }
  int64_t bytes() const;  // what one pass reads: w and its scales
};

// A 16/32-bit weight (a view is fine).
LinearWeight linear_weight(const Tensor& w);
// An FP8 weight: checks dtypes and shapes.
LinearWeight linear_weight_fp8(const Tensor& w, const Tensor& w_scale, const Tensor& input_scale = Tensor());

// Pre-tiles the FP8 weights among `ws` for the skinny GEMM's ring kernel (skinny_gemm_tiles: decode at 1..16 rows
// then moves each 16 KB chunk of a weight with one linear copy instead of 16 runs of 1 KB; ~3% more bytes than the
// weights). Opt-in, all or none: with ANVIL_SKINNY_TILES=1, when their bytes fit in `room`; unset or 0 never; anything
// else is an error. Opt-in because the gain is small for the memory (H200, 8B FP8: +7.2 GB for 0.4-0.9% at batch
// 4-16, docs/decode_kernels.md, twenty-first round). Weights that already have theirs keep them (a captured decode
// step may read them). Returns the bytes the weights' tiles take.
int64_t linear_tile_weights(const std::vector<LinearWeight*>& ws, int64_t room);

// y = x @ (w_scale * w)^T. Checks every argument (the 16-bit path through matmul_fwd).
void linear_fwd(const Tensor& x, const LinearWeight& w, Tensor& y);

// Decode fusion: y = (the prologue's x) @ (w_scale * w)^T, where the prologue is the norm or SwiGLU that makes x
// (SkinnyPrologue, skinny_gemm.h). When linear_fuses() — a GPU, rows that take the skinny kernel, 16-bit or FP8
// weights, ANVIL_DECODE_FUSION unset or =stage (FP8 from 2 rows: the prologue in the ring's f16 staging) or =1
// (every product the skinny kernels take; opt-in: slower on the H200, see linear.cpp), ANVIL_GEMM unset or auto
// — this is skinny_gemm_fused (x not rounded to bf16); otherwise the unfused kernels run (add_rms_norm_fwd /
// rms_norm_fwd / swiglu_fwd into a temporary, then linear_fwd). Either way h_out receives the residual sum.
// y (rows, OC) or (B, T, OC); x_dtype: the prologue's.
bool linear_fuses(int64_t rows, const LinearWeight& w, Device d, DType x_dtype);
void linear_fwd_fused(const SkinnyPrologue& pro, const LinearWeight& w, Tensor& y);

}  // namespace anvil
