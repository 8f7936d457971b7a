// attention front-ends: argument checks and backend dispatch.
#include <cmath>
#include <vector>

#include "kernels/attention/attention.h"

namespace anvil {

static bool gpu_head_dim(int64_t HD) { return HD == 16 || HD == 32 || HD == 64 || HD == 80 || HD == 96 || HD == 128; }

// t must have `shape`, q's dtype and device, and be contiguous.
static void check_like(const char* op, const char* name, const Tensor& t, const Shape& shape, const Tensor& q) {
  check_shape(op, name, t, shape);
  check_dtype(op, name, t, q.dtype());
  check_contiguous(op, name, t);
  check_same_device(op, q, "q", t, name);
}

// q (B, T, NH, HD), k and v (B, T, NKV, HD); NH a multiple of NKV.
static void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  check_dim(op, "q", q, 4);
  check_dtype_in(op, "q", q, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "q", q);
  check_dim(op, "k", k, 4);
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2), HD = q.size(3), NKV = k.size(2);
  ANVIL_CHECK(HD > 0 && NH > 0, op, "q with NH > 0 heads of HD > 0", q.describe());
  ANVIL_CHECK(NKV > 0 && NH % NKV == 0, op, str("k with NKV heads dividing NH = ", NH), k.describe());
  check_like(op, "k", k, {B, T, NKV, HD}, q);
  check_like(op, "v", v, {B, T, NKV, HD}, q);
  ANVIL_CHECK(std::isfinite(scale), op, "a finite scale", scale);
  if (q.device().is_gpu())
    ANVIL_CHECK(gpu_head_dim(HD), op, "HD in {16, 32, 64, 80, 96, 128} on the GPU", HD);
}

static void check_lse(const char* op, const Tensor& lse, const Tensor& q) {
  check_shape(op, "lse", lse, {q.size(0), q.size(2), q.size(1)});
  check_dtype(op, "lse", lse, DType::f32);
  check_contiguous(op, "lse", lse);
  check_same_device(op, q, "q", lse, "lse");
}

void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse) {
  const char* op = "attention_fwd";
  check_qkv(op, q, k, v, scale);
  check_like(op, "out", out, q.shape(), q);
  check_lse(op, lse, q);
  if (q.numel() == 0) return;
  if (q.device().is_cpu()) return attention_fwd_cpu(q, k, v, scale, out, lse);
#ifdef ANVIL_HAS_GPU
  return attention_fwd_gpu(q, k, v, scale, out, lse);
#endif
}

void attention_bwd(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const char* op = "attention_bwd";
  check_qkv(op, q, k, v, scale);
  check_like(op, "dout", dout, q.shape(), q);
  check_like(op, "out", out, q.shape(), q);
  check_lse(op, lse, q);
  check_like(op, "dq", dq, q.shape(), q);
  check_like(op, "dk", dk, k.shape(), q);
  check_like(op, "dv", dv, k.shape(), q);
  if (q.numel() == 0) return;
  if (q.device().is_cpu()) return attention_bwd_cpu(dout, q, k, v, out, lse, scale, dq, dk, dv);
#ifdef ANVIL_HAS_GPU
  return attention_bwd_gpu(dout, q, k, v, out, lse, scale, dq, dk, dv);
#endif
}

void attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                      float scale, Tensor& out) {
  const char* op = "attention_decode";
  check_dim(op, "q", q, 3);
  check_dtype_in(op, "q", q, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "q", q);
  check_dim(op, "k_cache", k_cache, 4);
  const int64_t B = q.size(0), NH = q.size(1), HD = q.size(2), Tmax = k_cache.size(1), NKV = k_cache.size(2);
  ANVIL_CHECK(HD > 0 && NH > 0, op, "q with NH > 0 heads of HD > 0", q.describe());
  ANVIL_CHECK(NKV > 0 && NH % NKV == 0, op, str("k_cache with NKV heads dividing NH = ", NH), k_cache.describe());
  ANVIL_CHECK(Tmax > 0, op, "a cache with Tmax > 0 rows", k_cache.describe());
  check_like(op, "k_cache", k_cache, {B, Tmax, NKV, HD}, q);
  check_like(op, "v_cache", v_cache, {B, Tmax, NKV, HD}, q);
  check_shape(op, "lens", lens, {B});
  check_dtype(op, "lens", lens, DType::i32);
  check_contiguous(op, "lens", lens);
  check_same_device(op, q, "q", lens, "lens");
  check_like(op, "out", out, q.shape(), q);
  ANVIL_CHECK(std::isfinite(scale), op, "a finite scale", scale);
  if (B == 0) return;
  if (q.device().is_cpu()) {
    const int32_t* n = lens.data<int32_t>();
    for (int64_t b = 0; b < B; b++)
      ANVIL_CHECK(n[b] >= 1 && n[b] <= Tmax, op, str("lens[", b, "] in [1, ", Tmax, "]"), n[b]);
    return attention_decode_cpu(q, k_cache, v_cache, lens, scale, out);
  }
#ifdef ANVIL_HAS_GPU
  ANVIL_CHECK(gpu_head_dim(HD), op, "HD in {16, 32, 64, 80, 96, 128} on the GPU", HD);
  return attention_decode_gpu(q, k_cache, v_cache, lens, scale, out);
#endif
}

}  // namespace anvil
