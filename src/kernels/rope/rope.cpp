// rope front-ends: argument checks and backend dispatch. The backward is the forward rotated the other way.
#include "kernels/rope/rope.h"

namespace anvil {

// The GPU kernel keeps a token's cos/sin table (HD floats) in shared memory: 8192 floats = 32 KB.
constexpr int64_t kMaxHeadDim = 8192;

static void check_and_run(const char* op, const char* xn, const Tensor& x, const Tensor& pos, const Tensor& inv_freq,
                          const char* yn, Tensor& y, bool inverse) {
  check_dim(op, xn, x, 3);
  check_dtype_in(op, xn, x, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, xn, x);
  const int64_t N = x.size(0), HD = x.size(2);
  ANVIL_CHECK(HD > 0 && HD % 2 == 0 && HD <= kMaxHeadDim, op, str(xn, " (N, NH, HD) with HD even, in [2, ", kMaxHeadDim, "]"),
              x.describe());
  check_shape(op, "pos", pos, {N});
  check_dtype(op, "pos", pos, DType::i32);
  check_contiguous(op, "pos", pos);
  check_shape(op, "inv_freq", inv_freq, {HD / 2});
  check_dtype(op, "inv_freq", inv_freq, DType::f32);
  check_contiguous(op, "inv_freq", inv_freq);
  check_shape(op, yn, y, x.shape());
  check_dtype(op, yn, y, x.dtype());
  check_contiguous(op, yn, y);
  check_same_device(op, x, xn, pos, "pos");
  check_same_device(op, x, xn, inv_freq, "inv_freq");
  check_same_device(op, x, xn, y, yn);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return rope_fwd_cpu(x, pos, inv_freq, y, inverse);
#ifdef ANVIL_HAS_GPU
  return rope_fwd_gpu(x, pos, inv_freq, y, inverse);
#endif
}

void rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y) {
  check_and_run("rope_fwd", "x", x, pos, inv_freq, "y", y, false);
}

void rope_bwd(const Tensor& dy, const Tensor& pos, const Tensor& inv_freq, Tensor& dx) {
  check_and_run("rope_bwd", "dy", dy, pos, inv_freq, "dx", dx, true);
}

}  // namespace anvil
