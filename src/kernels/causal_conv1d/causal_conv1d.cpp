// causal_conv1d front-ends: argument checks and backend dispatch.
#include "kernels/causal_conv1d/causal_conv1d.h"

namespace anvil {

// w (D, W) f32 with W in {2, 3, 4}; bias (D) f32 or undefined. Returns W.
static int64_t check_weights(const char* op, const Tensor& w, const Tensor& bias, int64_t D, const Tensor& x) {
  check_dim(op, "w", w, 2);
  ANVIL_CHECK(w.size(1) >= 2 && w.size(1) <= 4, op, "kernel width W in {2, 3, 4} (w of shape (D, W))",
              w.describe());
  check_shape(op, "w", w, {D, w.size(1)});
  check_dtype(op, "w", w, DType::f32);
  check_contiguous(op, "w", w);
  check_same_device(op, x, "x", w, "w");
  if (bias.defined()) {
    check_shape(op, "bias", bias, {D});
    check_dtype(op, "bias", bias, DType::f32);
    check_contiguous(op, "bias", bias);
    check_same_device(op, x, "x", bias, "bias");
  }
  return w.size(1);
}

static void check_like(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  check_shape(op, name, t, x.shape());
  check_dtype(op, name, t, x.dtype());
  check_contiguous(op, name, t);
  check_same_device(op, x, "x", t, name);
}

static void check_x(const char* op, const Tensor& x) {
  check_dim(op, "x", x, 3);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "x", x);
  ANVIL_CHECK(x.numel() > 0, op, "x (B, D, L) with B, D, L > 0", x.describe());
}

void causal_conv1d_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out) {
  const char* op = "causal_conv1d_fwd";
  check_x(op, x);
  check_weights(op, w, bias, x.size(1), x);
  check_like(op, "out", out, x);
  // Each output reads W-1 earlier inputs that another thread may already have overwritten.
  ANVIL_CHECK(out.data_ptr() != x.data_ptr(), op, "out not aliasing x", "out == x");
  if (x.device().is_cpu()) return causal_conv1d_fwd_cpu(x, w, bias, silu, out);
#ifdef ANVIL_HAS_GPU
  return causal_conv1d_fwd_gpu(x, w, bias, silu, out);
#endif
}

void causal_conv1d_bwd(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                       Tensor& dx, Tensor& dw, Tensor& dbias) {
  const char* op = "causal_conv1d_bwd";
  check_x(op, x);
  const int64_t D = x.size(1), W = check_weights(op, w, bias, D, x);
  check_like(op, "dout", dout, x);
  // dx may also be a (D, B, L) buffer seen as (B, D, L) (the Mamba backward's in_proj gradient reads it so).
  check_rows_bdl_or_dbl(op, "dx", dx, x.shape());
  check_dtype(op, "dx", dx, x.dtype());
  check_same_device(op, x, "x", dx, "dx");
  ANVIL_CHECK(dx.data_ptr() != dout.data_ptr() && dx.data_ptr() != x.data_ptr(), op,
              "dx not aliasing dout or x", "an aliased dx");
  check_shape(op, "dw", dw, {D, W});
  check_dtype(op, "dw", dw, DType::f32);
  check_contiguous(op, "dw", dw);
  check_same_device(op, x, "x", dw, "dw");
  if (dbias.defined()) {  // optional: leave it undefined to skip the bias gradient
    check_shape(op, "dbias", dbias, {D});
    check_dtype(op, "dbias", dbias, DType::f32);
    check_contiguous(op, "dbias", dbias);
    check_same_device(op, x, "x", dbias, "dbias");
  }
  if (x.device().is_cpu()) return causal_conv1d_bwd_cpu(dout, x, w, bias, silu, dx, dw, dbias);
#ifdef ANVIL_HAS_GPU
  return causal_conv1d_bwd_gpu(dout, x, w, bias, silu, dx, dw, dbias);
#endif
}

void causal_conv1d_update(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                          Tensor& out) {
  const char* op = "causal_conv1d_update";
  check_dim(op, "x", x, 2);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "x", x);
  ANVIL_CHECK(x.numel() > 0, op, "x (B, D) with B, D > 0", x.describe());
  const int64_t B = x.size(0), D = x.size(1), W = check_weights(op, w, bias, D, x);
  check_shape(op, "conv_state", conv_state, {B, D, W - 1});
  check_dtype(op, "conv_state", conv_state, x.dtype());
  check_contiguous(op, "conv_state", conv_state);
  check_same_device(op, x, "x", conv_state, "conv_state");
  check_like(op, "out", out, x);
  if (x.device().is_cpu()) return causal_conv1d_update_cpu(x, conv_state, w, bias, silu, out);
#ifdef ANVIL_HAS_GPU
  return causal_conv1d_update_gpu(x, conv_state, w, bias, silu, out);
#endif
}

}  // namespace anvil
