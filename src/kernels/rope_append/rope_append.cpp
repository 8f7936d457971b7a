// rope_append front-end: argument checks and backend dispatch.
#include "kernels/rope_append/rope_append.h"

namespace anvil {

// The GPU kernel keeps a token's cos/sin table (HD floats) in shared memory, as rope does.
constexpr int64_t kMaxHeadDim = 8192;

void rope_append(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                 Tensor& v_cache) {
  const char* op = "rope_append";
  check_dim(op, "q", q, 4);
  check_dim(op, "k_cache", k_cache, 4);
  check_dtype_in(op, "qkv", qkv, {DType::f32, DType::bf16, DType::f16});
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2), HD = q.size(3);
  const int64_t Tmax = k_cache.size(1), NKV = k_cache.size(2);
  ANVIL_CHECK(HD > 0 && HD % 2 == 0 && HD <= kMaxHeadDim, op, str("q (B, T, NH, HD) with HD even, in [2, ", kMaxHeadDim, "]"),
              q.describe());
  check_shape(op, "qkv", qkv, {B, T, (NH + 2 * NKV) * HD});
  check_shape(op, "k_cache", k_cache, {B, Tmax, NKV, HD});
  check_shape(op, "v_cache", v_cache, {B, Tmax, NKV, HD});
  ANVIL_CHECK(T <= Tmax, op, str("at most Tmax = ", Tmax, " new tokens"), T);
  check_shape(op, "start", start, {B});
  check_dtype(op, "start", start, DType::i32);
  check_shape(op, "inv_freq", inv_freq, {HD / 2});
  check_dtype(op, "inv_freq", inv_freq, DType::f32);
  for (const Tensor* t : {&q, &k_cache, &v_cache}) check_dtype(op, "q/k_cache/v_cache", *t, qkv.dtype());
  check_contiguous(op, "qkv", qkv);
  check_contiguous(op, "start", start);
  check_contiguous(op, "inv_freq", inv_freq);
  check_contiguous(op, "q", q);
  check_contiguous(op, "k_cache", k_cache);
  check_contiguous(op, "v_cache", v_cache);
  check_same_device(op, qkv, "qkv", start, "start");
  check_same_device(op, qkv, "qkv", inv_freq, "inv_freq");
  check_same_device(op, qkv, "qkv", q, "q");
  check_same_device(op, qkv, "qkv", k_cache, "k_cache");
  check_same_device(op, qkv, "qkv", v_cache, "v_cache");
  if (q.numel() == 0) return;
  if (qkv.device().is_cpu()) return rope_append_cpu(qkv, start, inv_freq, q, k_cache, v_cache);
#ifdef ANVIL_HAS_GPU
  return rope_append_gpu(qkv, start, inv_freq, q, k_cache, v_cache);
#endif
}

}  // namespace anvil
