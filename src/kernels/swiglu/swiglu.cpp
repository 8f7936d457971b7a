// swiglu front-ends: argument checks and backend dispatch.
#include "kernels/swiglu/swiglu.h"

#include <cstdint>

namespace anvil {

// gu (..., 2H) contiguous f32/bf16/f16 with H > 0; returns the shape of out (..., H).
static Shape check_gu(const char* op, const Tensor& gu) {
  check_contiguous(op, "gu", gu);
  check_dtype_in(op, "gu", gu, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(gu.dim() >= 1 && gu.size(-1) > 0 && gu.size(-1) % 2 == 0, op,
              "gu with an even, non-zero last dimension (gate and up stacked: 2H)", gu.describe());
  ANVIL_CHECK(gu.size(-1) / 2 <= INT32_MAX, op, "H < 2^31", gu.size(-1) / 2);
  Shape s = gu.shape();
  s.back() /= 2;
  return s;
}

void swiglu_fwd(const Tensor& gu, Tensor& out, const Tensor& out_scale) {
  const char* op = "swiglu_fwd";
  const Shape os = check_gu(op, gu);
  check_shape(op, "out", out, os);
  check_contiguous(op, "out", out);
  check_same_device(op, gu, "gu", out, "out");
  if (out.dtype() == DType::e4m3fn || out.dtype() == DType::e4m3fnuz) {
    ANVIL_CHECK(out_scale.defined(), op, str("out_scale (1) f32 with an ", dtype_name(out.dtype()), " out"),
                "no out_scale");
    check_shape(op, "out_scale", out_scale, {1});
    check_dtype(op, "out_scale", out_scale, DType::f32);
    check_same_device(op, gu, "gu", out_scale, "out_scale");
  } else {
    ANVIL_CHECK(out.dtype() == gu.dtype(), op, str("out of dtype ", dtype_name(gu.dtype()), ", e4m3fn or e4m3fnuz"),
                out.describe());
    ANVIL_CHECK(!out_scale.defined(), op, "no out_scale (it scales FP8 outputs only)", out_scale.describe());
  }
  if (gu.numel() == 0) return;
  if (gu.device().is_cpu()) return swiglu_fwd_cpu(gu, out, out_scale);
#ifdef ANVIL_HAS_GPU
  return swiglu_fwd_gpu(gu, out, out_scale);
#endif
}

void swiglu_bwd(const Tensor& dout, const Tensor& gu, Tensor& dgu) {
  const char* op = "swiglu_bwd";
  const Shape os = check_gu(op, gu);
  check_shape(op, "dout", dout, os);
  check_dtype(op, "dout", dout, gu.dtype());
  check_contiguous(op, "dout", dout);
  check_same_device(op, gu, "gu", dout, "dout");
  check_shape(op, "dgu", dgu, gu.shape());
  check_dtype(op, "dgu", dgu, gu.dtype());
  check_contiguous(op, "dgu", dgu);
  check_same_device(op, gu, "gu", dgu, "dgu");
  if (gu.numel() == 0) return;
  if (gu.device().is_cpu()) return swiglu_bwd_cpu(dout, gu, dgu);
#ifdef ANVIL_HAS_GPU
  return swiglu_bwd_gpu(dout, gu, dgu);
#endif
}

}  // namespace anvil
