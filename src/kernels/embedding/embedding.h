// embedding: out[n] = table[ids[n]].
//
// Shapes:  ids (N) i32 [N = B*T];  table (V, C);  out (N, C);  dtable (V, C) f32.
// Dtypes:  table/out f32/bf16/f16 (the same).
// Errors:  an id outside [0, V) is an error naming the position (the GPU kernel flags it, the front-end
//          reports it after the launch synchronises... on the CPU at once).
// Gradients: dtable is accumulated into (+=); rows of repeated ids add up.
#pragma once
#include "core/tensor.h"

namespace anvil {

void embedding_fwd(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd(const Tensor& dout, const Tensor& ids, Tensor& dtable);

void embedding_fwd_ref(const int32_t* ids, const double* table, double* out, int64_t N, int64_t V, int64_t C);
void embedding_bwd_ref(const double* dout, const int32_t* ids, double* dtable, int64_t N, int64_t V, int64_t C);

void embedding_fwd_cpu(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd_cpu(const Tensor& dout, const Tensor& ids, Tensor& dtable);
void embedding_fwd_gpu(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd_gpu(const Tensor& dout, const Tensor& ids, Tensor& dtable);

}  // namespace anvil
