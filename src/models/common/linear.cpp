// The inference linear layer: 16-bit weights through matmul_fwd, FP8 weights through skinny_gemm (few rows) or
// activation quantisation + matmul_fp8 (many rows). See linear.h for the paths and why.
#include "models/common/linear.h"

#include "backends/backend.h"
#include <cstdlib>
#include <cstring>

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/matmul/matmul.h"
#include "kernels/quantize/quantize.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/skinny_gemm/skinny_gemm.h"
#include "kernels/swiglu/swiglu.h"

namespace anvil {

int64_t LinearWeight::bytes() const {
  int64_t b = w.defined() ? int64_t(w.nbytes()) : 0;
  if (w_scale.defined()) b += int64_t(w_scale.nbytes());
  return b;
}

LinearWeight linear_weight(const Tensor& w) {
  check_defined("linear_weight", "w", w);
  check_dim("linear_weight", "w", w, 2);
  check_dtype_in("linear_weight", "w", w, {DType::f32, DType::bf16, DType::f16});
  LinearWeight lw;
  lw.w = w;
  return lw;
}

LinearWeight linear_weight_fp8(const Tensor& w, const Tensor& w_scale, const Tensor& input_scale) {
  const char* op = "linear_weight_fp8";
  check_defined(op, "w", w);
  check_dim(op, "w", w, 2);
  check_contiguous(op, "w", w);
  check_dtype_in(op, "w", w, {DType::e4m3fn, DType::e4m3fnuz});
  check_defined(op, "w_scale", w_scale);
  check_dim(op, "w_scale", w_scale, 1);
  ANVIL_CHECK(w_scale.numel() == 1 || w_scale.numel() == w.size(0), op,
              str("w_scale of shape [1] or [", w.size(0), "] (per output channel)"), w_scale.describe());
  check_dtype(op, "w_scale", w_scale, DType::f32);
  check_contiguous(op, "w_scale", w_scale);
  check_same_device(op, w, "w", w_scale, "w_scale");
  LinearWeight lw;
  lw.w = w, lw.w_scale = w_scale;
  if (input_scale.defined()) {
    check_shape(op, "input_scale", input_scale, {1});
    check_dtype(op, "input_scale", input_scale, DType::f32);
    check_same_device(op, w, "w", input_scale, "input_scale");
    lw.input_scale = input_scale;
  }
  return lw;
}

int64_t linear_tile_weights(const std::vector<LinearWeight*>& ws, int64_t room) {
  const char* knob = std::getenv("ANVIL_SKINNY_TILES");
  const bool set = knob && *knob;
  ANVIL_CHECK(!set || !std::strcmp(knob, "0") || !std::strcmp(knob, "1"), "linear_tile_weights",
              "ANVIL_SKINNY_TILES unset, 0 or 1", knob);
  const bool on = set && knob[0] == '1';
  // Copies made before stay (a captured decode step may read them); 0 only makes no new ones.
  int64_t need = 0, have = 0;
  for (const LinearWeight* lw : ws) {
    if (!lw->is_fp8()) continue;
    if (lw->tiles.defined()) have += lw->tiles.numel();
    else need += skinny_gemm_tiles_bytes(lw->w);
  }
  if (need == 0 || !on || need > room) return have;
  std::vector<LinearWeight*> made;
  try {
    for (LinearWeight* lw : ws)
      if (lw->is_fp8() && !lw->tiles.defined()) lw->tiles = skinny_gemm_tiles(lw->w), made.push_back(lw);
  } catch (const Error&) {
    for (LinearWeight* lw : made) lw->tiles = Tensor();  // none rather than some: the room was misjudged
    return have;
  }
  return have + need;
}

// FP8 rows that take the weight-only skinny kernel. Where it has its tensor-core path (CUDA sm_80+), all 16:
// H200, 8B projections, µs per call at 4 / 16 rows (op harness, 2026-11-30): q|k|v 19.0 / 20.9, o 14.5 / 15.5,
// gate|up 49.3 / 56.9, down 31.4 / 34.1 — below bf16 through cuBLASLt (24.0 / 23.7, 16.5 / 18.1, 62.5 / 64.7,
// 38.7 / 41.2), which the per-token quantisation + FP8 cuBLASLt path did not reach (batch 8: 5.49 ms/step
// against 4.73 for bf16). Without it, on a GPU with FP8 arithmetic, one: the FMA kernel is bound by its fp32
// FMAs from a few rows up (at 16 rows 84-277 µs per call), so more rows are quantised per token and take the
// vendor FP8 GEMM. Without FP8 arithmetic (A100, MI250) matmul_fp8 would dequantise in the tiled kernel: the
// skinny kernel stays the better one up to its 16 rows. From 17 to 32 rows, e4m3fn on sm_90 also stays weight-only
// where the ring takes it in one pass (skinny_gemm_wide): batch 24 FP8 decode on the H200 3.55 ms/step against 4.88
// through the per-token quantisation and cuBLASLt's FP8 GEMM (docs/decode_kernels.md, twenty-third and twenty-fourth
// rounds).
static int64_t fp8_skinny_rows(Device d) {
  if (!d.is_gpu()) return kSkinnyMaxRows;
#ifdef ANVIL_HAS_GPU
  if (skinny_gemm_has_mma(d)) return kSkinnyMaxRows;
#endif
  return backend(d).info().fp8_compute ? 1 : kSkinnyMaxRows;
}

void linear_fwd(const Tensor& x, const LinearWeight& lw, Tensor& y) {
  const char* op = "linear_fwd";
  if (!lw.is_fp8()) return matmul_fwd(x, lw.w, Tensor(), y);
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) == lw.w.size(1), op,
              str("x (..., C) with C = ", lw.w.size(1), " (w's second dimension)"), x.describe());
  check_same_device(op, x, "x", lw.w, "w");
  const int64_t N = x.numel() / x.size(-1), C = x.size(-1), OC = lw.w.size(0);
  Shape ys = x.shape();
  ys.back() = OC;
  check_shape(op, "y", y, ys);
  check_contiguous(op, "y", y);
  check_dtype_in(op, "y", y, {x.dtype(), DType::f32});
  Tensor x2 = x.view({N, C}), y2 = y.view({N, OC});
  if (N <= fp8_skinny_rows(x.device()) || skinny_gemm_wide(N, lw.w, x.dtype()))
    return skinny_gemm(x2, lw.w, lw.w_scale, y2, lw.tiles);

  const Device dev = x.device();
  Tensor q = Tensor::empty({N, C}, lw.w.dtype(), dev);
  // matmul_fp8 writes bf16 or f32; an f16 y goes through an f32 buffer.
  const bool direct = y.dtype() == DType::f32 || y.dtype() == DType::bf16;
  Tensor out = direct ? y2 : Tensor::empty({N, OC}, DType::f32, dev);
  if (lw.input_scale.defined()) {
    quantize_fp8_per_tensor(x2, lw.input_scale, q);
    matmul_fp8(q, lw.input_scale, lw.w, lw.w_scale, out);
  } else {  // per token: the row scales go to matmul_fp8 as a vector
    Tensor row_scale = Tensor::empty({N}, DType::f32, dev);
    quantize_fp8_per_token(x2, q, row_scale);
    matmul_fp8(q, row_scale, lw.w, lw.w_scale, out);
  }
  if (!direct) cast(out, y2);
}

bool linear_fuses(int64_t rows, const LinearWeight& lw, Device d, DType x_dtype) {
  // ANVIL_DECODE_FUSION=1: every product the skinny kernels take. H200, Llama-3.1-8B shape, batch 1, graph: 4.94
  // ms/step unfused, 5.29 fused (FP8 3.37 / 3.69). ncu per launch, fused against unfused: gate|up 73.3 / 61.4 us,
  // down 42.5 / 36.0, q|k|v 23.2 / 16.4, LM head 289 / 250. Every block of the GEMM redoes the row's norm or SwiGLU
  // (7 waves of blocks for gate|up, 30 for the LM head) before its first FMA, while only one step of weights is in
  // flight, and that costs more than the 2-3 us kernel it replaces. See docs/decode_kernels.md.
  // Unset or =stage (the default): only the products whose prologue runs once, in the f16 staging before the ring
  // kernel (skinny_gemm_fused_stages: FP8 batch decode from 2 rows), where it replaces the norm's or SwiGLU's
  // kernel instead of being redone per block. FP8 loop, ms per step, staged / unfused: batch 8 3.26 / 3.39, batch
  // 16 3.69 / 3.82. 0: none; anything else is an error.
  static const int mode = [] {
    const char* e = std::getenv("ANVIL_DECODE_FUSION");
    const std::string v = e ? e : "";
    ANVIL_CHECK(v.empty() || v == "0" || v == "1" || v == "stage", "linear_fuses",
                "ANVIL_DECODE_FUSION unset, 0, 1 or stage", v);
    const char* g = std::getenv("ANVIL_GEMM");  // a forced GEMM path (matmul.cu) bypasses the skinny kernel
    if (g && *g && std::strcmp(g, "auto") != 0) return 0;
    return v == "0" ? 0 : v == "1" ? 1 : 2;
  }();
  if (mode == 0 || !d.is_gpu() || rows < 1) return false;
  if (mode == 2) return lw.is_fp8() && skinny_gemm_fused_stages(rows, lw.w, x_dtype);
  if (lw.is_fp8()) return rows <= fp8_skinny_rows(d) || skinny_gemm_wide(rows, lw.w, x_dtype);
  return (lw.w.dtype() == DType::bf16 || lw.w.dtype() == DType::f16) && rows <= kSkinnyCrossoverRows;
}

void linear_fwd_fused(const SkinnyPrologue& pro, const LinearWeight& lw, Tensor& y) {
  const char* op = "linear_fwd_fused";
  const int64_t rows = pro.rows(), OC = lw.w.size(0);
  ANVIL_CHECK(y.is_contiguous() && y.numel() == rows * OC, op, str("y (", rows, ", ", OC, ") contiguous"),
              y.describe());
  Tensor y2 = y.view({rows, OC});
  if (linear_fuses(rows, lw, pro.device(), pro.dtype())) return skinny_gemm_fused(pro, lw.w, lw.w_scale, y2);
  Tensor x = Tensor::empty({rows, pro.cols()}, pro.dtype(), pro.device());
  if (pro.kind == SkinnyPrologue::Kind::swiglu) {
    swiglu_fwd(pro.gu, x);
  } else {
    Tensor rstd = Tensor::empty({rows}, DType::f32, pro.device());
    Tensor h_out = pro.h_out;  // a handle on the caller's buffer
    if (pro.b.defined()) add_rms_norm_fwd(pro.b, pro.a, pro.gamma, pro.eps, h_out, x, rstd);
    else rms_norm_fwd(pro.a, pro.gamma, pro.eps, x, rstd);
  }
  linear_fwd(x, lw, y2);
}

}  // namespace anvil
