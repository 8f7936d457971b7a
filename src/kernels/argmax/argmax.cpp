// argmax_rows front-end: argument checks and backend dispatch.
#include "kernels/argmax/argmax.h"

namespace anvil {

void check_logits_rows(const char* op, const Tensor& logits) {
  check_dim(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::f32);
  check_contiguous(op, "logits", logits);
  ANVIL_CHECK(logits.size(0) >= 1 && logits.size(1) >= 1 && logits.size(1) < (int64_t(1) << 30), op,
              "logits (R, V) with R >= 1 and 1 <= V < 2^30", logits.describe());
}

void argmax_rows(const Tensor& logits, Tensor& ids, Tensor& bad) {
  const char* op = "argmax_rows";
  check_logits_rows(op, logits);
  const int64_t R = logits.size(0);
  check_dtype(op, "ids", ids, DType::i32);
  check_contiguous(op, "ids", ids);
  ANVIL_CHECK(ids.numel() == R, op, str("ids of ", R, " elements, one per logits row"), ids.describe());
  check_shape(op, "bad", bad, {R});
  check_dtype(op, "bad", bad, DType::i32);
  check_contiguous(op, "bad", bad);
  check_same_device(op, logits, "logits", ids, "ids");
  check_same_device(op, logits, "logits", bad, "bad");
  if (logits.device().is_cpu()) return argmax_rows_cpu(logits, ids, bad);
#ifdef ANVIL_HAS_GPU
  return argmax_rows_gpu(logits, ids, bad);
#endif
}

std::string argmax_bad_reason(int32_t code, int64_t V) {
  if (code < 0) return "";
  if (code >= 2 * V) return "every logit -inf";
  return str(code % 2 ? "inf" : "nan", " at id ", code / 2);
}

void throw_if_bad_logits(int32_t code, int64_t V) {
  if (code < 0) return;
  const char* expected =
      code >= 2 * V ? "at least one token with a finite logit" : "finite logits (or -inf for masked tokens)";
  ANVIL_THROW("sample", expected, argmax_bad_reason(code, V));
}

}  // namespace anvil
