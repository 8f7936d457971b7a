// elementwise front-ends: argument checks and backend dispatch.
#include "kernels/elementwise/elementwise.h"

#include <cmath>

namespace anvil {

namespace {
const std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};
const std::initializer_list<DType> kFloatFp8 = {DType::f32,  DType::bf16,     DType::f16,     DType::e4m3fn,
                                                DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz};

// `t` contiguous, with `x`'s element count and device.
void check_like(const char* op, const char* arg, const Tensor& t, const Tensor& x, const char* xname) {
  check_contiguous(op, arg, t);
  ANVIL_CHECK(t.numel() == x.numel(), op, str(arg, " with ", x.numel(), " elements (as ", xname, ")"), t.describe());
  check_same_device(op, x, xname, t, arg);
}
void check_scalar_out(const char* op, const Tensor& x, const Tensor& out) {
  check_shape(op, "out", out, {1});
  check_dtype(op, "out", out, DType::f32);
  check_same_device(op, x, "x", out, "out");
}
}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "add";
  check_contiguous(op, "a", a);
  check_dtype_in(op, "a", a, kFloat);
  check_like(op, "b", b, a, "a");
  check_dtype(op, "b", b, a.dtype());
  check_like(op, "out", out, a, "a");
  check_dtype(op, "out", out, a.dtype());
  if (a.numel() == 0) return;
  if (a.device().is_cpu()) return elementwise_add_cpu(a, b, out);
#ifdef ANVIL_HAS_GPU
  return elementwise_add_gpu(a, b, out);
#endif
}

void add_(Tensor& acc, const Tensor& x, float alpha) {
  const char* op = "add_";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, kFloat);
  check_like(op, "acc", acc, x, "x");
  ANVIL_CHECK(acc.dtype() == DType::f32 || acc.dtype() == x.dtype(), op,
              str("acc of dtype f32 or ", dtype_name(x.dtype()), " (x's)"), acc.describe());
  ANVIL_CHECK(std::isfinite(alpha), op, "a finite alpha", alpha);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return elementwise_add_inplace_cpu(acc, x, alpha);
#ifdef ANVIL_HAS_GPU
  return elementwise_add_inplace_gpu(acc, x, alpha);
#endif
}

void scale_(Tensor& x, float s) {
  const char* op = "scale_";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, kFloat);
  ANVIL_CHECK(std::isfinite(s), op, "a finite scale", s);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return elementwise_scale_cpu(x, s);
#ifdef ANVIL_HAS_GPU
  return elementwise_scale_gpu(x, s);
#endif
}

void add_int_(Tensor& x, int32_t v) {
  const char* op = "add_int_";
  check_contiguous(op, "x", x);
  check_dtype(op, "x", x, DType::i32);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return elementwise_add_int_cpu(x, v);
#ifdef ANVIL_HAS_GPU
  return elementwise_add_int_gpu(x, v);
#endif
}

void neg_exp(const Tensor& x, Tensor& out) {
  const char* op = "neg_exp";
  check_contiguous(op, "x", x);
  check_dtype(op, "x", x, DType::f32);
  check_like(op, "out", out, x, "x");
  check_dtype(op, "out", out, DType::f32);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return elementwise_neg_exp_cpu(x, out);
#ifdef ANVIL_HAS_GPU
  return elementwise_neg_exp_gpu(x, out);
#endif
}

void addcmul_(Tensor& acc, const Tensor& a, const Tensor& b, float alpha) {
  const char* op = "addcmul_";
  check_contiguous(op, "acc", acc);
  check_dtype(op, "acc", acc, DType::f32);
  check_like(op, "a", a, acc, "acc");
  check_dtype(op, "a", a, DType::f32);
  check_like(op, "b", b, acc, "acc");
  check_dtype(op, "b", b, DType::f32);
  ANVIL_CHECK(std::isfinite(alpha), op, "a finite alpha", alpha);
  if (acc.numel() == 0) return;
  if (acc.device().is_cpu()) return elementwise_addcmul_inplace_cpu(acc, a, b, alpha);
#ifdef ANVIL_HAS_GPU
  return elementwise_addcmul_inplace_gpu(acc, a, b, alpha);
#endif
}

void cast(const Tensor& src, Tensor& dst, float scale) {
  const char* op = "cast";
  check_contiguous(op, "src", src);
  check_dtype_in(op, "src", src, kFloatFp8);
  check_like(op, "dst", dst, src, "src");
  check_dtype_in(op, "dst", dst, kFloatFp8);
  ANVIL_CHECK(std::isfinite(scale) && scale > 0, op, "a finite scale > 0", scale);
  if (src.numel() == 0) return;
  if (src.device().is_cpu()) return elementwise_cast_cpu(src, dst, scale);
#ifdef ANVIL_HAS_GPU
  return elementwise_cast_gpu(src, dst, scale);
#endif
}

void sum_squares(const Tensor& x, Tensor& out) {
  const char* op = "sum_squares";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, kFloat);
  check_scalar_out(op, x, out);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return elementwise_sum_squares_cpu(x, out);
#ifdef ANVIL_HAS_GPU
  return elementwise_sum_squares_gpu(x, out);
#endif
}

void amax(const Tensor& x, Tensor& out) {
  const char* op = "amax";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, kFloat);
  check_scalar_out(op, x, out);
  if (x.numel() == 0) return out.zero_();
  if (x.device().is_cpu()) return elementwise_amax_cpu(x, out);
#ifdef ANVIL_HAS_GPU
  return elementwise_amax_gpu(x, out);
#endif
}

}  // namespace anvil
