// quantize front-ends: argument checks (shapes, dtypes, contiguity, devices, aliasing) and backend dispatch.
// x, q, y of any rank are viewed as (M, K) rows; the backends see 2-D tensors.
#include "kernels/quantize/quantize.h"

namespace anvil {
namespace {

void check_no_alias(const char* op, const Tensor& out, const char* oname, const Tensor& t, const char* name) {
  const char* o0 = static_cast<const char*>(out.data_ptr());
  const char* t0 = static_cast<const char*>(t.data_ptr());
  const bool overlap = out.nbytes() && t.nbytes() && o0 < t0 + t.nbytes() && t0 < o0 + out.nbytes();
  ANVIL_CHECK(!overlap, op, str(oname, " not to overlap ", name), str(out.describe(), " overlaps ", t.describe()));
}

// A contiguous (..., K) tensor with K > 0 in one of `dtypes`, on `ref`'s device; returns it as (M, K).
Tensor rows(const char* op, const char* name, const Tensor& t, std::initializer_list<DType> dtypes, const Tensor& ref,
            const char* ref_name) {
  check_defined(op, name, t);
  check_contiguous(op, name, t);
  check_dtype_in(op, name, t, dtypes);
  ANVIL_CHECK(t.dim() >= 1 && t.size(-1) > 0, op, str(name, " (..., K) with K > 0"), t.describe());
  check_same_device(op, ref, ref_name, t, name);
  return t.view({t.numel() / t.size(-1), t.size(-1)});
}

void check_scale(const char* op, const Tensor& scale, const Shape& shape, const Tensor& ref, const char* ref_name) {
  check_shape(op, "scale", scale, shape);
  check_dtype(op, "scale", scale, DType::f32);
  check_contiguous(op, "scale", scale);
  check_same_device(op, ref, ref_name, scale, "scale");
}

const std::initializer_list<DType> kFloats = {DType::f32, DType::bf16, DType::f16};
const std::initializer_list<DType> kFp8 = {DType::e4m3fn, DType::e4m3fnuz};

}  // namespace

void quantize_fp8_per_token(const Tensor& x, Tensor& q, Tensor& scale) {
  const char* op = "quantize_fp8_per_token";
  Tensor x2 = rows(op, "x", x, kFloats, x, "x");
  check_shape(op, "q", q, x.shape());
  Tensor q2 = rows(op, "q", q, kFp8, x, "x");
  check_scale(op, scale, {x2.size(0)}, x, "x");
  check_no_alias(op, q, "q", x, "x");
  check_no_alias(op, scale, "scale", x, "x");
  check_no_alias(op, scale, "scale", q, "q");
  if (x.device().is_cpu()) return quantize_fp8_per_token_cpu(x2, q2, scale);
#ifdef ANVIL_HAS_GPU
  return quantize_fp8_per_token_gpu(x2, q2, scale);
#endif
}

void quantize_fp8_per_tensor(const Tensor& x, const Tensor& scale, Tensor& q) {
  const char* op = "quantize_fp8_per_tensor";
  Tensor x2 = rows(op, "x", x, kFloats, x, "x");
  check_shape(op, "q", q, x.shape());
  Tensor q2 = rows(op, "q", q, kFp8, x, "x");
  check_scale(op, scale, {1}, x, "x");
  check_no_alias(op, q, "q", x, "x");
  check_no_alias(op, q, "q", scale, "scale");
  if (x.device().is_cpu()) return quantize_fp8_per_tensor_cpu(x2, scale, q2);
#ifdef ANVIL_HAS_GPU
  return quantize_fp8_per_tensor_gpu(x2, scale, q2);
#endif
}

void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& y) {
  const char* op = "dequantize_fp8";
  Tensor q2 = rows(op, "q", q, kFp8, q, "q");
  check_shape(op, "y", y, q.shape());
  Tensor y2 = rows(op, "y", y, kFloats, q, "q");
  const int64_t M = q2.size(0);
  check_defined(op, "scale", scale);
  ANVIL_CHECK(scale.dim() == 1 && (scale.numel() == 1 || scale.numel() == M), op,
              str("scale of shape [1] or [", M, "] (rows)"), scale.describe());
  check_scale(op, scale, scale.shape(), q, "q");
  check_no_alias(op, y, "y", q, "q");
  check_no_alias(op, y, "y", scale, "scale");
  if (q.device().is_cpu()) return dequantize_fp8_cpu(q2, scale, y2);
#ifdef ANVIL_HAS_GPU
  return dequantize_fp8_gpu(q2, scale, y2);
#endif
}

}  // namespace anvil
