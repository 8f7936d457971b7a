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
#pragma once
#include "core/tensor.h"

namespace anvil {

// chunk: vocabulary columns per step (0 = choose: about 64 MB of f32 logits per chunk).
void cross_entropy_fwd(const Tensor& h, const Tensor& w, const Tensor& targets, Tensor& loss, Tensor& lse,
                       int64_t chunk = 0);
void cross_entropy_bwd(const Tensor& dloss, const Tensor& h, const Tensor& w, const Tensor& targets,
                       const Tensor& lse, Tensor& dh, Tensor& dw, int64_t chunk = 0);

void cross_entropy_fwd_ref(const double* h, const double* w, const int32_t* targets, double* loss, double* lse,
                           int64_t N, int64_t V, int64_t C);
void cross_entropy_bwd_ref(const double* dloss, const double* h, const double* w, const int32_t* targets,
                           double* dh, double* dw, int64_t N, int64_t V, int64_t C);

}  // namespace anvil
