// attention: causal scaled-dot-product self-attention with grouped-query heads (GQA).
//
// Shapes:  q, out, dq, dout: (B, T, NH, HD);  k, v, dk, dv: (B, T, NKV, HD), NH % NKV == 0 (query head h
//          reads kv head h / (NH / NKV));  lse: (B, NH, T) f32, the log-sum-exp of each softmax row, saved by
//          the forward for the backward.  HD in {16, 32, 64, 80, 96, 128} on the GPU (any on the CPU).
// Dtypes:  q, k, v, out in f32/bf16/f16 (the same).
// Numerics: fp32 softmax with the running-max rescaling of flash attention; the GPU never materialises the
//          T x T matrix (forward and backward work on tiles in shared memory/registers).
// Gradients: dq, dk, dv are overwritten.
//
// Decode: one new query per sequence against a KV cache.
//   q (B, NH, HD);  k_cache, v_cache (B, Tmax, NKV, HD);  lens (B) i32 = valid cache rows (including the new
//   token, already written);  out (B, NH, HD).  The GPU splits long caches over blocks (flash-decoding).
#pragma once
#include "core/tensor.h"

namespace anvil {

void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse);
void attention_bwd(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv);
void attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                      float scale, Tensor& out);

void attention_fwd_ref(const double* q, const double* k, const double* v, double* out, double* lse, int64_t B,
                       int64_t T, int64_t NH, int64_t NKV, int64_t HD, double scale);
void attention_bwd_ref(const double* dout, const double* q, const double* k, const double* v, double* dq,
                       double* dk, double* dv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD,
                       double scale);

void attention_fwd_cpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse);
void attention_bwd_cpu(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv);
void attention_decode_cpu(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                          float scale, Tensor& out);
void attention_fwd_gpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse);
void attention_bwd_gpu(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv);
void attention_decode_gpu(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                          float scale, Tensor& out);

}  // namespace anvil
