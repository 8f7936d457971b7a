// rope_append: the front of attention at inference, in one pass. Splits the stacked q|k|v projection of each
// new token, rotates q and k (rope.h's rotate_half convention) at the token's position, writes q, and appends
// the rotated k and the plain v to the KV cache. Eager, this was 2 rope launches + 2 copies per layer and
// sequence; in a decode step of the 8B shape it is 32 launches instead of 128 + 64 B.
//
// Shapes:  qkv (B, T, (NH + 2*NKV) * HD): a row is [q heads | k heads | v heads] (the stacked projection);
//          start (B) i32 on the device: cache position of each sequence's first new token — token t of sequence
//          b is position start[b] + t, rotated by that angle and stored at that cache row;
//          inv_freq (HD/2) f32;  q (B, T, NH, HD);  k_cache, v_cache (B, Tmax, NKV, HD).
// Dtypes:  qkv, q and the caches one dtype: f32, bf16 or f16.
// Numerics: as rope: the f32 angle float(pos) * inv_freq[i], cos/sin in f32, one rounding into the dtype;
//          v is copied bit-exactly.
// Positions live on the device (so a captured decode step reads the current one): the front-end cannot see
//          them. The caller guarantees 0 <= start[b] and start[b] + T <= Tmax (the models check their host
//          copy of the lengths); a kernel skips rows outside [0, Tmax) rather than write out of bounds.
#pragma once
#include "core/tensor.h"

namespace anvil {

void rope_append(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                 Tensor& v_cache);

// fp64 reference: qkv (B*T rows of (NH+2NKV)*HD), q (B*T rows of NH*HD), caches (B, Tmax, NKV*HD).
void rope_append_ref(const double* qkv, const int32_t* start, const double* inv_freq, double* q, double* k_cache,
                     double* v_cache, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD, int64_t Tmax);

void rope_append_cpu(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                     Tensor& v_cache);
void rope_append_gpu(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                     Tensor& v_cache);

}  // namespace anvil
