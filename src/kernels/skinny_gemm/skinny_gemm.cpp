// skinny_gemm front-end: argument checks (shapes, dtypes, contiguity, devices, aliasing) and backend dispatch.
#include <climits>

#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace {

// An output must not overlap an input: the kernels read inputs while writing outputs.
void check_no_alias(const char* op, const Tensor& y, const Tensor& t, const char* name, const char* y_name = "y") {
  const char* y0 = static_cast<const char*>(y.data_ptr());
  const char* t0 = static_cast<const char*>(t.data_ptr());
  const bool overlap = y.nbytes() && t.nbytes() && y0 < t0 + t.nbytes() && t0 < y0 + y.nbytes();
  ANVIL_CHECK(!overlap, op, str(y_name, " not to overlap ", name), str(y.describe(), " overlaps ", t.describe()));
}

// w, w_scale and y for an x of M rows and K columns on the device of `ref` (named ref_name).
void check_w_y(const char* op, const Tensor& ref, const char* ref_name, int64_t M, int64_t K, const Tensor& w,
               const Tensor& w_scale, const Tensor& y) {
  check_defined(op, "w", w);
  check_dim(op, "w", w, 2);
  check_contiguous(op, "w", w);
  check_dtype_in(op, "w", w, {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz});
  check_same_device(op, ref, ref_name, w, "w");
  const int64_t N = w.size(0);
  ANVIL_CHECK(w.size(1) == K, op, str("w (N, K) with K = ", K, " (x's second dimension)"), w.describe());
  // The GPU kernel indexes columns and k with 32-bit ints (row offsets are 64-bit).
  ANVIL_CHECK(N <= INT_MAX && K <= INT_MAX, op, "N and K below 2^31", w.describe());
  if (w_scale.defined()) {
    check_dim(op, "w_scale", w_scale, 1);
    ANVIL_CHECK(w_scale.numel() == 1 || w_scale.numel() == N, op, str("w_scale of shape [1] or [", N, "]"),
                w_scale.describe());
    check_dtype(op, "w_scale", w_scale, DType::f32);
    check_contiguous(op, "w_scale", w_scale);
    check_same_device(op, ref, ref_name, w_scale, "w_scale");
  } else {
    ANVIL_CHECK(!dtype_is_fp8(w.dtype()), op, "a w_scale (f32 [1] or [N]) with fp8 weights", "none");
  }
  check_defined(op, "y", y);
  check_shape(op, "y", y, {M, N});
  check_contiguous(op, "y", y);
  check_dtype_in(op, "y", y, {DType::f32, DType::bf16, DType::f16});
  check_same_device(op, ref, ref_name, y, "y");
  check_no_alias(op, y, w, "w");
  if (w_scale.defined()) check_no_alias(op, y, w_scale, "w_scale");
}

// An activation input: defined, 2-D or 1-D as asked, contiguous, a float dtype, on ref's device.
void check_act(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dt, const Tensor& ref) {
  check_defined(op, name, t);
  check_shape(op, name, t, shape);
  check_contiguous(op, name, t);
  check_dtype(op, name, t, dt);
  check_same_device(op, ref, "the first input", t, name);
}

}  // namespace

void skinny_gemm(const Tensor& x, const Tensor& w, const Tensor& w_scale, Tensor& y, const Tensor& w_tiles) {
  const char* op = "skinny_gemm";
  check_defined(op, "x", x);
  check_dim(op, "x", x, 2);
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  const int64_t M = x.size(0), K = x.size(1);
  ANVIL_CHECK(M <= kSkinnyWideRows, op, str("x (M, K) with M <= ", kSkinnyWideRows, " rows (use matmul above)"),
              x.describe());
  check_w_y(op, x, "x", M, K, w, w_scale, y);
  check_no_alias(op, y, x, "x");
  if (w_tiles.defined()) {  // its size is checked against this GPU's grid where the ring kernel reads it
    check_dim(op, "w_tiles", w_tiles, 1);
    check_contiguous(op, "w_tiles", w_tiles);
    check_dtype(op, "w_tiles", w_tiles, DType::u8);
    check_same_device(op, x, "x", w_tiles, "w_tiles");
  }
  if (x.device().is_cpu()) return skinny_gemm_cpu(x, Tensor(), w, w_scale, 1.f, y);
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_gpu(x, Tensor(), w, w_scale, 1.f, y, w_tiles);
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", x.describe());
#endif
}

Tensor skinny_gemm_tiles(const Tensor& w) {
  check_defined("skinny_gemm_tiles", "w", w);
  check_dim("skinny_gemm_tiles", "w", w, 2);
  check_contiguous("skinny_gemm_tiles", "w", w);
  if (!w.device().is_gpu()) return Tensor();
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_tiles_gpu(w);
#else
  return Tensor();
#endif
}

int64_t skinny_gemm_tiles_bytes(const Tensor& w) {
  check_defined("skinny_gemm_tiles", "w", w);
  check_dim("skinny_gemm_tiles", "w", w, 2);
  if (!w.device().is_gpu()) return 0;
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_tiles_bytes_gpu(w);
#else
  return 0;
#endif
}

bool skinny_gemm_fused_stages(int64_t rows, const Tensor& w, DType x_dtype) {
  check_defined("skinny_gemm_fused_stages", "w", w);
  check_dim("skinny_gemm_fused_stages", "w", w, 2);
  if (!w.device().is_gpu() || rows < 1 || rows > kSkinnyWideRows) return false;
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_fused_stages_gpu(rows, w, x_dtype);
#else
  return false;
#endif
}

bool skinny_gemm_wide(int64_t rows, const Tensor& w, DType x_dtype) {
  check_defined("skinny_gemm_wide", "w", w);
  check_dim("skinny_gemm_wide", "w", w, 2);
  if (!w.device().is_gpu() || rows <= kSkinnyMaxRows || rows > kSkinnyWideRows) return false;
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_wide_gpu(rows, w, x_dtype);
#else
  return false;
#endif
}

void skinny_gemm_fused(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y) {
  const char* op = "skinny_gemm_fused";
  const bool glu = pro.kind == SkinnyPrologue::Kind::swiglu;
  const Tensor& x0 = glu ? pro.gu : pro.a;
  const char* x0_name = glu ? "gu" : "a";
  check_defined(op, x0_name, x0);
  check_dim(op, x0_name, x0, 2);
  check_contiguous(op, x0_name, x0);
  check_dtype_in(op, x0_name, x0, {DType::f32, DType::bf16, DType::f16});
  const int64_t M = x0.size(0), K = glu ? x0.size(1) / 2 : x0.size(1);
  ANVIL_CHECK(M <= kSkinnyWideRows, op, str(x0_name, " with at most ", kSkinnyWideRows, " rows"), x0.describe());
  if (glu) ANVIL_CHECK(x0.size(1) % 2 == 0, op, "gu (M, 2K): gate and up side by side", x0.describe());
  check_w_y(op, x0, x0_name, M, K, w, w_scale, y);
  check_no_alias(op, y, x0, x0_name);
  if (!glu) {
    check_act(op, "gamma", pro.gamma, {K}, x0.dtype(), x0);
    check_no_alias(op, y, pro.gamma, "gamma");
    ANVIL_CHECK(pro.eps >= 0.f, op, "eps >= 0", pro.eps);
    ANVIL_CHECK(pro.b.defined() == pro.h_out.defined(), op, "b and h_out both given or both left out",
                str("b ", pro.b.defined() ? "given" : "missing", ", h_out ",
                    pro.h_out.defined() ? "given" : "missing"));
    if (pro.b.defined()) {
      check_act(op, "b", pro.b, {M, K}, x0.dtype(), x0);
      check_act(op, "h_out", pro.h_out, {M, K}, x0.dtype(), x0);
      check_no_alias(op, y, pro.b, "b");
      check_no_alias(op, y, pro.h_out, "h_out");
      // Blocks write h_out while other blocks still read a and b: no in-place residual here.
      check_no_alias(op, pro.h_out, pro.a, "a", "h_out");
      check_no_alias(op, pro.h_out, pro.b, "b", "h_out");
    }
  }
  if (x0.device().is_cpu()) return skinny_gemm_fused_cpu(pro, w, w_scale, y);
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_fused_gpu(pro, w, w_scale, y);
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", x0.describe());
#endif
}

}  // namespace anvil
