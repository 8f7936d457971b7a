// topk_rows: the k most likely tokens of each logits row, on the logits' device, for a sampler that only needs
// them (top-k sampling: serve/sampler.h). Copying k (id, logit) pairs back costs 8k bytes instead of the whole
// row (513 KB at V = 128256), and the host's pass over the row goes away.
//
// Shapes:  logits (R, V) f32, 1 <= V < 2^30;  ids (R, k) i32;  vals (R, k) f32;  finite (R) i32;  bad (R) i32;
//          1 <= k <= kTopKMax. Same device.
// ids/vals: the k best of the row's finite logits, more likely first: the larger logit, then the lower id (the
//          sampler's order). Rows with fewer than k finite logits end in id -1, value -inf.
// finite:  how many logits of the row are not -inf (NaN and +inf excluded).
// bad:     argmax_rows' code (argmax.h): -1, or why the host sampler would throw.
#pragma once
#include "core/tensor.h"

namespace anvil {

constexpr int kTopKMax = 256;

void topk_rows(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad);

// fp64 reference, as above (vals rounded to f32 by the caller's comparison).
void topk_rows_ref(const double* logits, int64_t R, int64_t V, int k, int32_t* ids, double* vals, int32_t* finite,
                   int32_t* bad);

void topk_rows_cpu(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad);
void topk_rows_gpu(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad);

}  // namespace anvil
