// topk_rows front-end: argument checks and backend dispatch.
#include "kernels/topk/topk.h"

#include "kernels/argmax/argmax.h"

namespace anvil {

void topk_rows(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad) {
  const char* op = "topk_rows";
  check_logits_rows(op, logits);
  const int64_t R = logits.size(0);
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
