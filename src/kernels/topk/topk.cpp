// topk_rows front-end: argument checks and backend dispatch.
#include "kernels/topk/topk.h"

namespace anvil {

void topk_rows(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad) {
  const char* op = "topk_rows";
  check_dim(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::f32);
  check_contiguous(op, "logits", logits);
  const int64_t R = logits.size(0), V = logits.size(1);
  ANVIL_CHECK(R >= 1 && V >= 1 && V < (int64_t(1) << 30), op, "logits (R, V) with R >= 1 and 1 <= V < 2^30",
              logits.describe());
  ANVIL_CHECK(k >= 1 && k <= kTopKMax, op, str("1 <= k <= ", kTopKMax), k);
  auto out = [&](const char* name, Tensor& t, const Shape& s, DType dt) {
    check_shape(op, name, t, s);
    check_dtype(op, name, t, dt);
    check_contiguous(op, name, t);
    check_same_device(op, logits, "logits", t, name);
  };
  out("ids", ids, {R, k}, DType::i32);
  out("vals", vals, {R, k}, DType::f32);
  out("finite", finite, {R}, DType::i32);
  out("bad", bad, {R}, DType::i32);
  if (logits.device().is_cpu()) return topk_rows_cpu(logits, k, ids, vals, finite, bad);
#ifdef ANVIL_HAS_GPU
  return topk_rows_gpu(logits, k, ids, vals, finite, bad);
#endif
}

}  // namespace anvil
