// skinny_gemm front-end: argument checks (shapes, dtypes, contiguity, devices, aliasing) and backend dispatch.
#include <climits>

#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace {

// The output must not overlap an input: the kernels read inputs while writing y.
void check_no_alias(const char* op, const Tensor& y, const Tensor& t, const char* name) {
  const char* y0 = static_cast<const char*>(y.data_ptr());
  const char* t0 = static_cast<const char*>(t.data_ptr());
  const bool overlap = y.nbytes() && t.nbytes() && y0 < t0 + t.nbytes() && t0 < y0 + y.nbytes();
  ANVIL_CHECK(!overlap, op, str("y not to overlap ", name), str(y.describe(), " overlaps ", t.describe()));
}

}  // namespace

void skinny_gemm(const Tensor& x, const Tensor& w, const Tensor& w_scale, Tensor& y) {
  const char* op = "skinny_gemm";
  check_defined(op, "x", x);
  check_dim(op, "x", x, 2);
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  const int64_t M = x.size(0), K = x.size(1);
  ANVIL_CHECK(M <= kSkinnyMaxRows, op, str("x (M, K) with M <= ", kSkinnyMaxRows, " rows (use matmul above)"),
              x.describe());
  check_defined(op, "w", w);
  check_dim(op, "w", w, 2);
  check_contiguous(op, "w", w);
  check_dtype_in(op, "w", w, {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz});
  check_same_device(op, x, "x", w, "w");
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
    check_same_device(op, x, "x", w_scale, "w_scale");
  } else {
    ANVIL_CHECK(!dtype_is_fp8(w.dtype()), op, "a w_scale (f32 [1] or [N]) with fp8 weights", "none");
  }
  check_defined(op, "y", y);
  check_shape(op, "y", y, {M, N});
  check_contiguous(op, "y", y);
  check_dtype_in(op, "y", y, {DType::f32, DType::bf16, DType::f16});
  check_same_device(op, x, "x", y, "y");
  check_no_alias(op, y, x, "x");
  check_no_alias(op, y, w, "w");
  if (w_scale.defined()) check_no_alias(op, y, w_scale, "w_scale");
  if (x.device().is_cpu()) return skinny_gemm_cpu(x, Tensor(), w, w_scale, 1.f, y);
#ifdef ANVIL_HAS_GPU
  return skinny_gemm_gpu(x, Tensor(), w, w_scale, 1.f, y);
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", x.describe());
#endif
}

}  // namespace anvil
