// decode_stack: every decoder layer of a Llama-family model for one decode token (batch 1), in one persistent
// launch. The per-op step (models/llama/llama_infer.cpp) runs 9 kernels per layer; on an H200 at the 8B shape
// the GEMMs stream their weights at 60-91% of copy and the 7 small kernels between them (norms, rope, attention,
// SwiGLU) add ~0.5 ms per token, so the step took 4.9 ms against a 3.6 ms weight-bytes floor. Here the weights
// never stop flowing: a producer warp per block streams the block's share of every matrix, layer after layer,
// into a ring of shared-memory slots, independent of where the math is; the grid barriers between the phases of
// a layer and the small phases themselves run while the ring fills (see decode_stack.cu).
//
// Per layer, with h the residual stream and b the branch added to it (x are the GEMM inputs, rounded to T):
//   h = h + b (not in layer 0);  x = rms_norm(h) * in_norm;  qkv = x @ Wqkv^T
//   q, k = rope(q, k at position start);  k, v appended to the cache at row start;
//   att = softmax(q k^T * scale) v over cache rows [0, start]        (GQA: q-head i reads kv-head i / (NH/NKV))
//   b = att @ Wo^T;  h = h + b;  x = rms_norm(h) * post_norm;  gu = x @ Wgate_up^T
//   x = silu(gate) * up;  b = x @ Wdown^T
// After the call the residual before the final norm is h1 + branch (the caller's final add_rms_norm and LM head).
//
// Shapes:  h0, h1, branch (1, C) T; h0 holds the embedded token on entry, h1 and branch are overwritten.
//          Per layer: qkv (QD + 2 KVD, C), o (C, QD), gate_up (2H, C), down (C, H) weights (T, or e4m3fn with
//          f32 scales of shape (1) or (rows): y = x @ (scale * w)^T); in_norm, post_norm (C) T; k_cache, v_cache
//          (1, Tmax, NKV, HD) T.  start (1) i32 on the device: the token's position; inv_freq (HD/2) f32.
//          QD = NH * HD, KVD = NKV * HD.
// Dtypes:  T = bf16 (the activations and caches); weights bf16 or e4m3fn (weight-only FP8 as skinny_gemm).
// Numerics: the per-op step's, op by op: h rounded to T after each add, the norm from the rounded h, every GEMM
//          input (x) and output rounded to T, f32 accumulation, rope and attention in f32 as rope_append and
//          attention_decode. Sums run in another order than the per-op kernels, so results agree with the per-op
//          step to bf16 noise, not bit for bit; the step is deterministic (fixed assignment and orders).
// Reference: the per-op step itself (each op there has its fp64 reference and CPU version); the GPU test
//          DecodeStack.MatchesPerOpStep compares the two.
// Where it runs: a CUDA device with bulk copies (sm_90+), batch 1, HD in {32, 64, 128}, NH / NKV in {1, 2, 4, 8},
//          rows of 16-byte multiples, and enough shared memory for the ring; decode_stack_unsupported() names
//          what is missing and the model runs its per-op step instead. ANVIL_DECODE_STACK=0 turns it off;
//          ANVIL_DECODE_STACK_L2=normal copies the weights without the L2 evict-first hint;
//          ANVIL_DECODE_STACK_TILES=0/1 never/always pre-tiles FP8 weights (default: when device memory allows).
// Concurrency: one call at a time per device (its grid barrier and ticket counters live in the plan's scratch).
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil {

struct DecodeStackWeight {
  Tensor w;      // (rows, cols) T or e4m3fn
  Tensor scale;  // e4m3fn: f32 (1) or (rows); else undefined
};

struct DecodeStackLayer {
  DecodeStackWeight qkv, o, gate_up, down;
  Tensor in_norm, post_norm, k_cache, v_cache;
};

struct DecodeStackShape {
  int64_t C = 0, NH = 0, NKV = 0, HD = 0, H = 0;
  float eps = 1e-5f, attn_scale = 1.f;
};

// Empty when decode_stack can run these layers on their device; else what is missing (for logs and tests).
std::string decode_stack_unsupported(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers);

// The device-side plan of one model + KV cache: the layer table, scratch and counters. Built once per
// inference state (the cache addresses are baked in), so a captured decode step replays it.
class DecodeStack {
 public:
  // FP8 weights are also copied pre-tiled for the kernel's linear copies (decode_stack.cu, pretile), so a plan
  // sees the weights as they were when it was built. shared_tiles, when given, holds the model's copy for all its
  // plans: used when defined, else set to the one this plan makes.
  DecodeStack(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers, const Tensor& inv_freq,
              Tensor* shared_tiles = nullptr);
  // Runs every layer for the token at position start[0]; see the contract above. Launches only (capturable).
  void run(const Tensor& start, Tensor& h0, Tensor& h1, Tensor& branch) const;
  // Bytes of the pre-tiled FP8 copy this plan reads (0: none; the weights go through tensor maps).
  int64_t pretiled_bytes() const { return tiles_.defined() ? tiles_.numel() : 0; }
  // Blocks of the launch: one per SM at most, fewer where that reads fewer padded weight bytes (stack_grid).
  int grid() const { return grid_; }

 private:
  DecodeStackShape s_;
  // Unused in builds without bulk copies (the HIP build compiles only the refusing constructor).
  [[maybe_unused]] int64_t L_ = 0;
  [[maybe_unused]] int64_t Tmax_ = 0;
  [[maybe_unused]] DType wdt_ = DType::bf16;
  [[maybe_unused]] int64_t max_splits_ = 1;  // attention splits per kv-head at most (scratch_ holds their partials)
  [[maybe_unused]] int attn_rows_ = 1;       // rows per attention split at least
  [[maybe_unused]] int grid_ = 1;            // blocks of the launch, one per SM at most (decode_stack.cu, stack_grid)
  Tensor table_;    // the layer table (device copy of decode_stack.cu's Layer structs, as bytes)
  Tensor scratch_;  // the hand-offs (tagged words), attention partials (f32), the blocks' residual copies (bf16)
  Tensor counters_; // i32: [0] blocks done, [1, 1 + NKV) attention tickets, [1 + NKV] launch generation,
                    // then the hand-offs' arrival counts (decode_stack_gpu.cuh)
  Tensor tmaps_;    // FP8: the weights' tile maps (decode_stack.cu), 128 B per weight
  Tensor tiles_;    // FP8: the weights pre-tiled for linear copies, or undefined (decode_stack.cu, pretile)
  Tensor inv_freq_;
};

bool decode_stack_enabled();  // ANVIL_DECODE_STACK unset or not "0"
// ANVIL_DECODE_STACK_TRACE=1: every run synchronises and prints the time of each phase (the caller then runs its
// decode steps eagerly: a captured graph cannot read the stamps back).
bool decode_stack_tracing();

}  // namespace anvil
