// cross_entropy: softmax cross-entropy fused with the LM head, chunked over the vocabulary so the full
// (N, V) fp32 logits never exist (a 128k vocabulary at N = 16k tokens would be 8 GB).
//
// Shapes:  h (N, C) final hidden states;  w (V, C) LM head (tied: the embedding table);  targets (N) i32,
//          -1 = ignored position;  loss (N) f32 (0 where ignored);  lse (N) f32 saved for the backward;
//          dh (N, C);  dw (V, C) f32.
// Dtypes:  h, w f32/bf16/f16 (the same); logits chunks are computed in f32.
// Numerics: per row, loss = lse(logits) - logits[target], lse by a running max over chunks.
// Gradients: with upstream dloss (N) f32 (e.g. 1/num_valid for a mean): dlogits = dloss * (softmax - onehot),
//          recomputed chunk by chunk;  dh is overwritten;  dw is accumulated (+=).
// Chunks:  per chunk of Vc vocabulary rows, logits (N, Vc) f32 = h @ w_chunk^T through anvil::matmul; the
//          backward rounds dlogits into h's dtype (the GEMM inputs share one dtype), then dh (+)= dlogits @
//          w_chunk (accumulated in f32 across chunks) and dw_chunk += dlogits^T @ h.
// Training: cross_entropy_fwd_bwd gives loss, dh and dw from one pass that chunks the rows instead of the
//          vocabulary: a row chunk sees every vocabulary column, so its lse is known as soon as its logits are,
//          and its dlogits follow at once. The logits are computed once, not twice (fwd, then again in bwd): at
//          Mamba-130m's head (N = 32768, V = 50280, C = 768) that is one 2.5-TFLOP GEMM and one f32 pass over
//          6.6 GB of logits fewer per step, and dh is one GEMM over K = V instead of a per-chunk f32 sum.
//          Measured (H200, bf16, N 16384, V 128256, C 4096): 86.4 ms against 28.4 + 80.6 = 109.0 ms for fwd + bwd.
// Errors:  targets outside [0, V) other than -1 raise anvil::Error before anything is written; the check
//          reads targets on the host (on the GPU: a 4N-byte copy and a stream sync per call).
#pragma once
#include "core/tensor.h"

namespace anvil {

// chunk: vocabulary columns per step (0 = choose: about 64 MB of f32 logits per chunk).
void cross_entropy_fwd(const Tensor& h, const Tensor& w, const Tensor& targets, Tensor& loss, Tensor& lse,
                       int64_t chunk = 0);
void cross_entropy_bwd(const Tensor& dloss, const Tensor& h, const Tensor& w, const Tensor& targets,
                       const Tensor& lse, Tensor& dh, Tensor& dw, int64_t chunk = 0);

// dloss (N) f32 as cross_entropy_bwd's; loss (N) f32; dh (N, C) h's dtype, overwritten; dw (V, C) f32, +=.
// chunk_rows: rows per pass (0 = choose: about 1 GB of f32 logits per pass).
void cross_entropy_fwd_bwd(const Tensor& h, const Tensor& w, const Tensor& targets, const Tensor& dloss,
                           Tensor& loss, Tensor& dh, Tensor& dw, int64_t chunk_rows = 0);

void cross_entropy_fwd_ref(const double* h, const double* w, const int32_t* targets, double* loss, double* lse,
                           int64_t N, int64_t V, int64_t C);
void cross_entropy_bwd_ref(const double* dloss, const double* h, const double* w, const int32_t* targets,
                           double* dh, double* dw, int64_t N, int64_t V, int64_t C);

// Backend pieces that the chunked driver in cross_entropy.cpp runs between the GEMMs (arguments checked there).
// logits (N, Vc) f32 holds vocabulary columns [v0, v0 + Vc).
// Online lse over chunks: m, s (N) f32 = running max and running sum of exp(logit - m); tgt (N) f32 = the
// target's logit once its chunk has passed (0 for ignored rows). `first` starts the running values afresh.
void cross_entropy_chunk_fwd_cpu(const Tensor& logits, const Tensor& targets, int64_t v0, bool first, Tensor& m,
                                 Tensor& s, Tensor& tgt);
void cross_entropy_chunk_fwd_gpu(const Tensor& logits, const Tensor& targets, int64_t v0, bool first, Tensor& m,
                                 Tensor& s, Tensor& tgt);
// lse = m + log(s);  loss = lse - tgt (0 where targets == -1).
void cross_entropy_finish_cpu(const Tensor& m, const Tensor& s, const Tensor& tgt, const Tensor& targets,
                              Tensor& loss, Tensor& lse);
void cross_entropy_finish_gpu(const Tensor& m, const Tensor& s, const Tensor& tgt, const Tensor& targets,
                              Tensor& loss, Tensor& lse);
// dlogits (N, Vc) in h's dtype (may be logits itself when that is f32) = dloss * (exp(logit - lse) - onehot),
// zero on ignored rows.
void cross_entropy_chunk_bwd_cpu(const Tensor& logits, const Tensor& targets, int64_t v0, const Tensor& lse,
                                 const Tensor& dloss, Tensor& dlogits);
void cross_entropy_chunk_bwd_gpu(const Tensor& logits, const Tensor& targets, int64_t v0, const Tensor& lse,
                                 const Tensor& dloss, Tensor& dlogits);
// dst (any float dtype) = src (f32), same number of elements: dh from its f32 accumulator.
void cross_entropy_cast_cpu(const Tensor& src, Tensor& dst);
void cross_entropy_cast_gpu(const Tensor& src, Tensor& dst);

}  // namespace anvil
