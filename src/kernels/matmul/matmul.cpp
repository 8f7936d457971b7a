// matmul front-ends: argument checks (shapes, dtypes, contiguity, devices, aliasing) and backend dispatch.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/matmul/matmul.h"

namespace anvil {
namespace {

void check_matrix(const char* op, const char* name, const Tensor& t, const Tensor& ref, const char* ref_name) {
  check_dim(op, name, t, 2);
  check_contiguous(op, name, t);
  check_same_device(op, ref, ref_name, t, name);
  // OpenBLAS and the GPU launchers take 32-bit sizes.
  ANVIL_CHECK(t.size(0) <= INT_MAX && t.size(1) <= INT_MAX, op, str(name, " with sizes below 2^31"), t.describe());
}

// The output must not overlap an input: the kernels read inputs while writing c.
void check_no_alias(const char* op, const Tensor& c, const Tensor& t, const char* name) {
  const char* c0 = static_cast<const char*>(c.data_ptr());
  const char* t0 = static_cast<const char*>(t.data_ptr());
  const bool overlap = c.nbytes() && t.nbytes() && c0 < t0 + t.nbytes() && t0 < c0 + c.nbytes();
  ANVIL_CHECK(!overlap, op, str("the output not to overlap ", name), str(c.describe(), " overlaps ", t.describe()));
}

void run_matmul(const Tensor& a, const Tensor& b, Tensor& c, bool ta, bool tb, float alpha, float beta) {
  if (c.device().is_cpu()) return matmul_cpu(a, b, c, ta, tb, alpha, beta);
#ifdef ANVIL_HAS_GPU
  return matmul_gpu(a, b, c, ta, tb, alpha, beta);
#else
  ANVIL_THROW("matmul", "a CPU tensor (this build has no GPU backend)", c.describe());
#endif
}

// x (..., C) and its partner (..., OC) flattened to rows.
Tensor rows_view(const Tensor& t) { return t.view({t.numel() / t.size(-1), t.size(-1)}); }
Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

// The product's (M, N, K) from the last two dimensions of a and b, checked to agree on K.
struct GemmDims {
  int64_t M, N, K;
};
GemmDims gemm_dims(const char* op, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const int64_t r = a.dim() - 2;
  const int64_t M = trans_a ? a.size(r + 1) : a.size(r), Ka = trans_a ? a.size(r) : a.size(r + 1);
  const int64_t N = trans_b ? b.size(r) : b.size(r + 1), Kb = trans_b ? b.size(r + 1) : b.size(r);
  ANVIL_CHECK(Ka == Kb, op,
              str("op(a) (M, K) and op(b) (K, N) to agree on K (trans_a=", trans_a, ", trans_b=", trans_b, ")"),
              str("K=", Ka, " from a ", a.describe(), ", K=", Kb, " from b ", b.describe()));
  return {M, N, Ka};
}

// Operand and output checks shared by the three products: dims, contiguity, devices, dtypes, sizes.
void check_operands(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, int64_t dims, int64_t c_dims) {
  check_defined(op, "a", a);
  check_dim(op, "a", a, dims);
  check_dim(op, "b", b, dims);
  check_dim(op, "c", c, c_dims);
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&a, "a"}, {&b, "b"}, {&c, "c"}}) {
    check_contiguous(op, name, *t);
    check_same_device(op, a, "a", *t, name);
    for (int64_t d = 0; d < t->dim(); d++)  // OpenBLAS and the GPU launchers take 32-bit sizes
      ANVIL_CHECK(t->size(d) <= INT_MAX, op, str(name, " with sizes below 2^31"), t->describe());
  }
  check_dtype_in(op, "a", a, {DType::f32, DType::bf16, DType::f16});
  check_dtype(op, "b", b, a.dtype());
  check_dtype_in(op, "c", c, {a.dtype(), DType::f32});
}

// Scratch for matmul_batch_sum's per-batch products on the GPU: up to this many f32 (256 MiB), more batches in
// rounds that accumulate.
constexpr int64_t kBatchSumScratchFloats = int64_t(64) << 20;

// A batch sum into an f32 c of at least this many elements runs as one product per batch, each accumulating
// into c (beta = 1), instead of one batched product into f32 parts and a pass that sums them: a product that
// size fills the GPU on its own (2048 x 2048 outputs are 256 tiles of 128 x 128), and the parts cost B writes
// and B reads of c's size plus c's read-modify-write (Mamba-1.4B's in_proj and out_proj gradients: 134 MB of
// parts, ~55 us a call on the H200, 8.2 ms of a training step). Smaller products keep the batched call, whose
// one launch is what makes them cheap. ANVIL_BATCH_SUM=parts|serial forces one way (read on every call).
constexpr int64_t kBatchSumSerialMinOutputs = int64_t(1) << 22;

bool batch_sum_serial(const Tensor& c, int64_t M, int64_t N) {
  const char* e = std::getenv("ANVIL_BATCH_SUM");
  if (e && *e && std::string(e) != "auto") {
    if (std::string(e) == "parts") return false;
    if (std::string(e) == "serial") return c.dtype() == DType::f32;  // a 16-bit c would round every partial sum
    ANVIL_THROW("ANVIL_BATCH_SUM", "'parts', 'serial' or 'auto' (or unset)", str("'", e, "'"));
  }
  return c.dtype() == DType::f32 && M * N >= kBatchSumSerialMinOutputs;
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  const char* op = "matmul";
  check_operands(op, a, b, c, 2, 2);
  const GemmDims g = gemm_dims(op, a, b, trans_a, trans_b);
  check_shape(op, "c", c, {g.M, g.N});
  check_no_alias(op, c, a, "a");
  check_no_alias(op, c, b, "b");
  run_matmul(a, b, c, trans_a, trans_b, alpha, beta);
}

void matmul_batched(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
                    float beta) {
  const char* op = "matmul_batched";
  check_operands(op, a, b, c, 3, 3);
  const int64_t B = c.size(0);
  ANVIL_CHECK(a.size(0) == B || a.size(0) == 1, op, str("a with a batch of ", B, " (c's) or 1"), a.describe());
  ANVIL_CHECK(b.size(0) == B || b.size(0) == 1, op, str("b with a batch of ", B, " (c's) or 1"), b.describe());
  const GemmDims g = gemm_dims(op, a, b, trans_a, trans_b);
  check_shape(op, "c", c, {B, g.M, g.N});
  check_no_alias(op, c, a, "a");
  check_no_alias(op, c, b, "b");
  if (B == 0 || g.M == 0 || g.N == 0) return;
  if (c.device().is_cpu()) {
    for (int64_t i = 0; i < B; i++) {
      Tensor ci = c.select(0, i);
      matmul_cpu(a.select(0, a.size(0) == 1 ? 0 : i), b.select(0, b.size(0) == 1 ? 0 : i), ci, trans_a, trans_b,
                 alpha, beta);
    }
    return;
  }
#ifdef ANVIL_HAS_GPU
  GemmBatch bt;
  bt.count = B;
  bt.stride_a = a.size(0) == 1 ? 0 : a.size(1) * a.size(2);
  bt.stride_b = b.size(0) == 1 ? 0 : b.size(1) * b.size(2);
  bt.stride_c = g.M * g.N;
  Tensor c0 = c.select(0, 0);  // the first product's (M, N) view; the others follow at the strides
  matmul_gpu(a.select(0, 0), b.select(0, 0), c0, trans_a, trans_b, alpha, beta, bt);
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", c.describe());
#endif
}

void matmul_batch_sum(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
                      float beta) {
  const char* op = "matmul_batch_sum";
  check_operands(op, a, b, c, 3, 2);
  const int64_t B = a.size(0);
  ANVIL_CHECK(b.size(0) == B, op, str("b with a's batch of ", B), b.describe());
  const GemmDims g = gemm_dims(op, a, b, trans_a, trans_b);
  check_shape(op, "c", c, {g.M, g.N});
  check_no_alias(op, c, a, "a");
  check_no_alias(op, c, b, "b");
  if (g.M == 0 || g.N == 0) return;
  if (B <= 1 || c.device().is_cpu() || batch_sum_serial(c, g.M, g.N)) {  // a product per batch, accumulating
    if (B == 0) return run_matmul(a.view({g.M, 0}), b.view({0, g.N}), c, false, false, alpha, beta);
    for (int64_t i = 0; i < B; i++)
      run_matmul(a.select(0, i), b.select(0, i), c, trans_a, trans_b, alpha, i ? 1.f : beta);
    return;
  }
#ifdef ANVIL_HAS_GPU
  const int64_t per_round = std::max<int64_t>(1, std::min(B, kBatchSumScratchFloats / (g.M * g.N)));
  Tensor parts = Tensor::empty({per_round, g.M, g.N}, DType::f32, c.device());
  for (int64_t i0 = 0; i0 < B; i0 += per_round) {
    const int64_t n = std::min(per_round, B - i0);
    Tensor pn = parts.slice(0, 0, n), p0 = parts.select(0, 0);
    GemmBatch bt;
    bt.count = n;
    bt.stride_a = a.size(1) * a.size(2);
    bt.stride_b = b.size(1) * b.size(2);
    bt.stride_c = g.M * g.N;
    matmul_gpu(a.select(0, i0), b.select(0, i0), p0, trans_a, trans_b, 1.f, 0.f, bt);
    matmul_sum_parts_gpu(pn, c, alpha, i0 ? 1.f : beta);
  }
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", c.describe());
#endif
}

void matmul_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const char* op = "matmul_fwd";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, "x (..., C) with C > 0", x.describe());
  check_dim(op, "w", w, 2);
  const int64_t C = x.size(-1), OC = w.size(0);
  ANVIL_CHECK(w.size(1) == C, op, str("w (OC, C) with C = ", C, " (x's last dimension)"), w.describe());
  check_dtype(op, "w", w, x.dtype());
  check_same_device(op, x, "x", w, "w");
  if (bias.defined()) {
    check_shape(op, "bias", bias, {OC});
    check_dtype(op, "bias", bias, x.dtype());
    check_contiguous(op, "bias", bias);
    check_same_device(op, x, "x", bias, "bias");
  }
  check_shape(op, "y", y, with_last(x.shape(), OC));
  check_dtype_in(op, "y", y, {x.dtype(), DType::f32});
  check_contiguous(op, "y", y);
  Tensor x2 = rows_view(x), y2 = rows_view(y);
  if (bias.defined()) {  // y is written before matmul() checks it: check what that write could break
    check_same_device(op, x, "x", y, "y");
    check_no_alias(op, y, x, "x");
    check_no_alias(op, y, w, "w");
    check_no_alias(op, y, bias, "bias");
    if (y.device().is_cpu()) matmul_bias_rows_cpu(bias, y2);
#ifdef ANVIL_HAS_GPU
    else matmul_bias_rows_gpu(bias, y2);
#endif
  }
  matmul(x2, w, y2, false, true, 1.f, bias.defined() ? 1.f : 0.f);
}

void matmul_bwd(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& dbias) {
  const char* op = "matmul_bwd";
  check_contiguous(op, "x", x);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, "x (..., C) with C > 0", x.describe());
  check_dim(op, "w", w, 2);
  const int64_t C = x.size(-1), OC = w.size(0);
  ANVIL_CHECK(w.size(1) == C, op, str("w (OC, C) with C = ", C, " (x's last dimension)"), w.describe());
  check_dtype(op, "w", w, x.dtype());
  check_same_device(op, x, "x", w, "w");
  check_shape(op, "dy", dy, with_last(x.shape(), OC));
  check_dtype(op, "dy", dy, x.dtype());
  check_contiguous(op, "dy", dy);
  check_same_device(op, x, "x", dy, "dy");
  Tensor dy2 = rows_view(dy), x2 = rows_view(x);
  if (dx.defined()) {
    check_shape(op, "dx", dx, x.shape());
    check_dtype(op, "dx", dx, x.dtype());
    check_contiguous(op, "dx", dx);
    check_no_alias(op, dx, x, "x");  // dw below reads x after dx is written
    Tensor dx2 = rows_view(dx);
    matmul(dy2, w, dx2, false, false, 1.f, 0.f);
  }
  if (dw.defined()) {
    check_shape(op, "dw", dw, {OC, C});
    check_dtype(op, "dw", dw, DType::f32);
    matmul(dy2, x2, dw, true, false, 1.f, 1.f);
  }
  if (dbias.defined()) {
    check_shape(op, "dbias", dbias, {OC});
    check_dtype(op, "dbias", dbias, DType::f32);
    check_contiguous(op, "dbias", dbias);
    check_same_device(op, x, "x", dbias, "dbias");
    check_no_alias(op, dbias, dy, "dy");
    if (dbias.device().is_cpu()) return matmul_dbias_cpu(dy, dbias);
#ifdef ANVIL_HAS_GPU
    return matmul_dbias_gpu(dy, dbias);
#endif
  }
}

void matmul_fp8(const Tensor& a, const Tensor& a_scale, const Tensor& w, const Tensor& w_scale, Tensor& out) {
  const char* op = "matmul_fp8";
  check_defined(op, "a", a);
  check_matrix(op, "a", a, a, "a");
  check_matrix(op, "w", w, a, "a");
  check_matrix(op, "out", out, a, "a");
  check_dtype_in(op, "a", a, {DType::e4m3fn, DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz, DType::bf16});
  check_dtype_in(op, "w", w, {DType::e4m3fn, DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz});
  check_dtype_in(op, "out", out, {DType::bf16, DType::f32});
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  ANVIL_CHECK(w.size(1) == K, op, str("w (N, K) with K = ", K, " (a's second dimension)"), w.describe());
  check_shape(op, "out", out, {M, N});
  check_dim(op, "a_scale", a_scale, 1);
  ANVIL_CHECK(a_scale.numel() == 1 || (a_scale.numel() == M && dtype_is_fp8(a.dtype())), op,
              str("a_scale of shape [1], or [", M, "] (per row) with fp8 a"),
              str(a_scale.describe(), " with a ", dtype_name(a.dtype())));
  check_dtype(op, "a_scale", a_scale, DType::f32);
  check_contiguous(op, "a_scale", a_scale);
  check_same_device(op, a, "a", a_scale, "a_scale");
  check_dim(op, "w_scale", w_scale, 1);
  ANVIL_CHECK(w_scale.numel() == 1 || w_scale.numel() == N, op, str("w_scale of shape [1] or [", N, "]"),
              w_scale.describe());
  check_dtype(op, "w_scale", w_scale, DType::f32);
  check_contiguous(op, "w_scale", w_scale);
  check_same_device(op, a, "a", w_scale, "w_scale");
  check_no_alias(op, out, a, "a");
  check_no_alias(op, out, w, "w");
  if (out.device().is_cpu()) return matmul_fp8_cpu(a, a_scale, w, w_scale, out);
#ifdef ANVIL_HAS_GPU
  return matmul_fp8_gpu(a, a_scale, w, w_scale, out);
#else
  ANVIL_THROW(op, "a CPU tensor (this build has no GPU backend)", out.describe());
#endif
}

}  // namespace anvil
