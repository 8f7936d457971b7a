// add_rms_norm front-ends: argument checks and backend dispatch.
#include "kernels/add_rms_norm/add_rms_norm.h"

#include <cstdint>

namespace anvil {

// `t` has h's role: contiguous (N, C) in `like`'s dtype on its device.
static void check_nc(const char* op, const char* name, const Tensor& t, const Tensor& like, const char* like_name) {
  check_shape(op, name, t, like.shape());
  check_dtype(op, name, t, like.dtype());
  check_contiguous(op, name, t);
  check_same_device(op, like, like_name, t, name);
}

// x (N, C) f32/bf16/f16 with C > 0; w (C) in x's dtype; rstd (N) f32. Returns N.
static int64_t check_common(const char* op, const char* xname, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  check_contiguous(op, xname, x);
  check_dtype_in(op, xname, x, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) > 0 && x.size(-1) <= INT32_MAX, op,
              str(xname, " with a last dimension in [1, 2^31)"), x.describe());
  const int64_t N = x.numel() / x.size(-1);
  check_shape(op, "w", w, {x.size(-1)});
  check_dtype(op, "w", w, x.dtype());
  check_contiguous(op, "w", w);
  check_same_device(op, x, xname, w, "w");
  check_shape(op, "rstd", rstd, {N});
  check_dtype(op, "rstd", rstd, DType::f32);
  check_contiguous(op, "rstd", rstd);
  check_same_device(op, x, xname, rstd, "rstd");
  return N;
}

void add_rms_norm_fwd(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                      Tensor& rstd, const Tensor& y_scale) {
  const char* op = "add_rms_norm_fwd";
  const int64_t N = check_common(op, "a", a, w, rstd);
  ANVIL_CHECK(eps > 0, op, "eps > 0", eps);
  check_nc(op, "b", b, a, "a");
  check_nc(op, "h", h, a, "a");
  check_shape(op, "y", y, a.shape());
  check_contiguous(op, "y", y);
  check_same_device(op, a, "a", y, "y");
  if (y.dtype() == DType::e4m3fn || y.dtype() == DType::e4m3fnuz) {
    ANVIL_CHECK(y_scale.defined(), op, str("y_scale (1) f32 with an ", dtype_name(y.dtype()), " y"), "no y_scale");
    check_shape(op, "y_scale", y_scale, {1});
    check_dtype(op, "y_scale", y_scale, DType::f32);
    check_same_device(op, a, "a", y_scale, "y_scale");
  } else {
    ANVIL_CHECK(y.dtype() == a.dtype(), op, str("y of dtype ", dtype_name(a.dtype()), ", e4m3fn or e4m3fnuz"),
                y.describe());
    ANVIL_CHECK(!y_scale.defined(), op, "no y_scale (it scales FP8 outputs only)", y_scale.describe());
  }
  if (N == 0) return;
  if (a.device().is_cpu()) return add_rms_norm_fwd_cpu(a, b, w, eps, h, y, rstd, y_scale);
#ifdef ANVIL_HAS_GPU
  return add_rms_norm_fwd_gpu(a, b, w, eps, h, y, rstd, y_scale);
#endif
}

void add_rms_norm_bwd(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w, const Tensor& rstd,
                      Tensor& dh, Tensor& dw) {
  const char* op = "add_rms_norm_bwd";
  const int64_t N = check_common(op, "h", h, w, rstd);
  check_nc(op, "dy", dy, h, "h");
  if (dh_in.defined()) check_nc(op, "dh_in", dh_in, h, "h");
  check_nc(op, "dh", dh, h, "h");
  check_shape(op, "dw", dw, {h.size(-1)});
  check_dtype(op, "dw", dw, DType::f32);
  check_contiguous(op, "dw", dw);
  check_same_device(op, h, "h", dw, "dw");
  if (N == 0) return;
  if (h.device().is_cpu()) return add_rms_norm_bwd_cpu(dy, dh_in, h, w, rstd, dh, dw);
#ifdef ANVIL_HAS_GPU
  return add_rms_norm_bwd_gpu(dy, dh_in, h, w, rstd, dh, dw);
#endif
}

}  // namespace anvil
