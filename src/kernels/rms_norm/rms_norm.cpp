// rms_norm front-ends: argument checks and backend dispatch.
#include "kernels/rms_norm/rms_norm.h"

namespace anvil {

static void check_common(const char* op, const Tensor& x, const Tensor& w) {
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, "x with a non-empty last dimension", x.describe());
  check_shape(op, "w", w, {x.size(-1)});
  check_dtype(op, "w", w, x.dtype());
  check_same_device(op, x, "x", w, "w");
}

void rms_norm_fwd(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd) {
  const char* op = "rms_norm_fwd";
  check_common(op, x, w);
  ANVIL_CHECK(eps > 0, op, "eps > 0", eps);
  check_shape(op, "y", y, x.shape());
  check_dtype(op, "y", y, x.dtype());
  check_contiguous(op, "y", y);
  check_shape(op, "rstd", rstd, {x.numel() / x.size(-1)});
  check_dtype(op, "rstd", rstd, DType::f32);
  check_same_device(op, x, "x", y, "y");
  check_same_device(op, x, "x", rstd, "rstd");
  if (x.device().is_cpu()) return rms_norm_fwd_cpu(x, w, eps, y, rstd);
#ifdef ANVIL_HAS_GPU
  return rms_norm_fwd_gpu(x, w, eps, y, rstd);
#endif
}

void rms_norm_bwd(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Tensor& dx, Tensor& dw) {
  const char* op = "rms_norm_bwd";
  check_common(op, x, w);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"dy", &dy}, {"dx", &dx}}) {
    check_shape(op, name, *t, x.shape());
    check_dtype(op, name, *t, x.dtype());
    check_contiguous(op, name, *t);
    check_same_device(op, x, "x", *t, name);
  }
  check_shape(op, "rstd", rstd, {x.numel() / x.size(-1)});
  check_dtype(op, "rstd", rstd, DType::f32);
  check_shape(op, "dw", dw, {x.size(-1)});
  check_dtype(op, "dw", dw, DType::f32);
  check_same_device(op, x, "x", dw, "dw");
  if (x.device().is_cpu()) return rms_norm_bwd_cpu(dy, x, w, rstd, dx, dw);
#ifdef ANVIL_HAS_GPU
  return rms_norm_bwd_gpu(dy, x, w, rstd, dx, dw);
#endif
}

}  // namespace anvil
