// skinny_gemm: the decode GEMM, a few activation rows against a large weight, bound by weight bytes.
//
// Shapes:  y (M, N) = x (M, K) @ (w_scale * w)^T, with M in [0, kSkinnyWideRows] rows (batch of decode tokens;
//          past kSkinnyMaxRows in one pass over w only where skinny_gemm_wide says so, else in slices of 16 rows),
//          w (N, K) row-major (Hugging Face nn.Linear layout: one row per output channel n),
//          w_scale f32 (1) per tensor or (N) per output channel, or undefined (= 1; 16-bit weights only).
// Dtypes:  x f32/bf16/f16; w bf16/f16, or e4m3fn/e4m3fnuz (weight-only FP8: decoded to f32 in registers, the
//          activations stay 16/32-bit); y f32/bf16/f16. Any x dtype goes with any w dtype.
// Numerics: fp32 accumulation; the scales multiply the fp32 sum once, then y is rounded once into its dtype.
//          FP8 NaN codes (e4m3fn S.1111.111, e4m3fnuz 0x80) make their output column NaN, as in the reference.
//          Deterministic: split-K partial sums (when the GPU splits K, see docs/decode_kernels.md) are added by a
//          second kernel in a fixed order, never by atomics.
// Fusion:  by stacking, not by a multi-output kernel. Projections that read the same x are one weight whose rows
//          are the concatenated outputs: q, k, v -> w (NH*HD + 2*NKV*HD, C); gate, up -> w (2*H, C). One launch
//          streams all of them; the caller slices y's columns. Per-channel FP8 scales stack the same way.
// Prologue fusion (skinny_gemm_fused): the kernel that made x (add_rms_norm, swiglu) is folded into the x staging,
//          one launch instead of two per decode projection; see SkinnyPrologue.
// Backends: CPU loops (OpenMP over n, f32 accumulation); GPU: a warp-per-columns streaming kernel (skinny_gemm.cu),
//          and on CUDA sm_80+ for 2..16 rows with bf16 x (bf16/e4m3 w) or f16 x (f16/e4m3 w) a tensor-core
//          (mma.m16n8k16) kernel with the same contract (ANVIL_SKINNY_MMA=0 turns it off; docs/decode_kernels.md);
//          on sm_90+ a ring kernel (skinny_gemm_ring.cu: weights and x through bulk copies into shared memory, the
//          same MMAs; e4m3fn converted in hardware at 1..8 rows) takes 16-bit and e4m3fn weights at 1..16 rows
//          (e4m3fn: not one row of a weight under 20 MB) and e4m3fnuz at 9..16 (ANVIL_SKINNY_RING=0 / 2); given
//          w_tiles (skinny_gemm_tiles), it reads w from that pre-tiled copy (bf16 3-8% faster, FP8 0-2%); e4m3fn
//          with f16 or staged bf16 x also at 17..32 rows (skinny_gemm_wide).
//          matmul / matmul_fwd / matmul_fp8 route M <= kSkinnyMaxRows products here on the GPU (matmul.cu);
//          on the CPU, matmul sends c = a @ b^T of at most 4 rows (f32 w too) to skinny_gemm_cpu (matmul_cpu.cpp).
#pragma once
#include "core/tensor.h"

namespace anvil {

// The most activation rows one pass of the register kernels takes: the GPU kernel keeps M x (columns per warp) f32
// accumulators per lane in registers (16 x 4 = 64), and at 16 rows the fp32 FMA units already cap it
// (docs/decode_kernels.md).
constexpr int64_t kSkinnyMaxRows = 16;
// The most rows skinny_gemm and skinny_gemm_fused take: one pass over w where skinny_gemm_wide(rows, ...) holds,
// else slices of kSkinnyMaxRows.
constexpr int64_t kSkinnyWideRows = 32;
// Whether `rows` (kSkinnyMaxRows < rows <= kSkinnyWideRows) rows of x_dtype x against w take one pass over w (the
// ring kernel: CUDA sm_90, e4m3fn w, bf16 or f16 x). False on the CPU and for other rows.
bool skinny_gemm_wide(int64_t rows, const Tensor& w, DType x_dtype);

// Rows up to which matmul and the linear layer send 16-bit products y = x @ w^T to this kernel on the GPU.
// H200, 2026-11-30, 8B projections, µs per call at 4 / 16 rows: the tensor-core path q|k|v 30.2 / 27.4, o 16.7 /
// 17.3, gate|up 125.0 / 86.5, down 60.1 / 50.2 against cuBLASLt 24.0 / 23.7, 16.5 / 18.1, 62.5 / 64.7, 38.7 / 41.2
// (the FMA path: 30-306 µs). At one row the skinny kernel had looked faster (61-87% of copy against 44-89%), but
// only under the op harness's old timing (warm L2, launch latency counted). Timed behind an L2-evicting read,
// cuBLASLt wins at one row as well: q|k|v 18.4 against 23.3 µs, o 14.3 / 15.5, gate|up 56.8 / 68.7, down 32.0 /
// 39.6 (and in a graph of launches 16.2 / 19.9, 12.8 / 12.5, 54.9 / 66.4, 30.9 / 37.8). So 0 with CUDA; with
// HIP hipBLASLt has not been measured against it, and one row stays here. FP8 weights have no vendor path at
// these rows: see linear.cpp. ANVIL_GEMM=skinny forces this kernel up to kSkinnyMaxRows (A/B).
#ifdef ANVIL_CUDA
constexpr int64_t kSkinnyCrossoverRows = 0;
#else
constexpr int64_t kSkinnyCrossoverRows = 1;
#endif

// Front-end: checks every argument, then runs on x's device. w_tiles, optional: skinny_gemm_tiles(w), made once
// when the weight is loaded; the ring kernel then moves each 16 KB chunk of w with one linear copy.
void skinny_gemm(const Tensor& x, const Tensor& w, const Tensor& w_scale, Tensor& y,
                 const Tensor& w_tiles = Tensor());

// w (N, K) pre-tiled for the ring kernel on w's GPU: u8 (bytes), each block's 16-row tiles of w as 16 KB chunks
// in the layout of a shared-memory ring slot (backends/gpu/weight_ring.cuh), ~3% larger than w. Undefined where
// no kernel would read it (CPU, HIP, GPUs without bulk copies, rows that are not whole 128-byte lines). A copy:
// remake it if w changes. Made on the current stream.
Tensor skinny_gemm_tiles(const Tensor& w);
int64_t skinny_gemm_tiles_bytes(const Tensor& w);  // the size skinny_gemm_tiles(w) would have, 0 when undefined

// What the fused kernel stages as x (M, K), computed from the previous kernel's inputs:
//   rms_norm / add_rms_norm: h = a (+ b, rounded to a's dtype: add_rms_norm's h, written to h_out), and
//     y = rstd * ((h * gamma) @ (w_scale * w)^T),  rstd = 1 / sqrt(mean_k(h^2) + eps)
//     — add_rms_norm_fwd followed by skinny_gemm, except that the normed x is not rounded to 16 bits
//     (the 1/rms factor is applied to the f32 sums). a, b, h_out (M, K) and gamma (K) in one dtype (f32/bf16/
//     f16); h_out must not overlap a or b (blocks read a while others write h): the caller ping-pongs buffers.
//   swiglu: x = silu(gu[:, :K]) * gu[:, K:] in f32 (swiglu_fwd without rounding its output), gu (M, 2K).
struct SkinnyPrologue {
  enum class Kind { norm, swiglu };
  Kind kind = Kind::norm;
  Tensor a, b, gamma, h_out;  // norm (b and h_out: both or neither)
  float eps = 0.f;
  Tensor gu;  // swiglu

  static SkinnyPrologue rms_norm(const Tensor& a, const Tensor& gamma, float eps) {
    SkinnyPrologue p;
    p.a = a, p.gamma = gamma, p.eps = eps;
    return p;
  }
  static SkinnyPrologue add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& gamma, float eps,
                                     const Tensor& h_out) {
    SkinnyPrologue p = rms_norm(a, gamma, eps);
    p.b = b, p.h_out = h_out;
    return p;
  }
  static SkinnyPrologue swiglu(const Tensor& gu) {
    SkinnyPrologue p;
    p.kind = Kind::swiglu, p.gu = gu;
    return p;
  }
  int64_t rows() const { return kind == Kind::swiglu ? gu.size(0) : a.size(0); }
  int64_t cols() const { return kind == Kind::swiglu ? gu.size(1) / 2 : a.size(1); }
  DType dtype() const { return kind == Kind::swiglu ? gu.dtype() : a.dtype(); }
  Device device() const { return kind == Kind::swiglu ? gu.device() : a.device(); }
};

// Front-end: checks every argument (shapes, dtypes, aliasing), then runs on the prologue's device.
void skinny_gemm_fused(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y);
// Whether skinny_gemm_fused with `rows` rows of x_dtype inputs and weight w runs its prologue once, in the kernel
// that stages x as f16 for the ring (CUDA sm_90, e4m3fn w, bf16 inputs, 2-16 rows by default, K <= 16384), rather
// than in every block of a register kernel. False on the CPU.
bool skinny_gemm_fused_stages(int64_t rows, const Tensor& w, DType x_dtype);
void skinny_gemm_fused_cpu(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y);
void skinny_gemm_fused_gpu(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y);
bool skinny_gemm_fused_stages_gpu(int64_t rows, const Tensor& w, DType x_dtype);
bool skinny_gemm_wide_gpu(int64_t rows, const Tensor& w, DType x_dtype);

// fp64 reference (the spec): y[m][n] = w_scale[per_channel ? n : 0] * sum_k x[m][k] * w[n][k].
// w holds the already-decoded weight values (fp8 codes decoded exactly); w_scale may be nullptr (= 1).
void skinny_gemm_ref(const double* x, const double* w, const double* w_scale, bool per_channel, double* y, int64_t M,
                     int64_t N, int64_t K);

// Backends (arguments already checked). Internal entry shared with matmul's dispatch: x_scale (f32 (1) on x's
// device) and w_scale may be undefined (= 1); y = alpha * x_scale * w_scale[n] * (x @ w^T).
void skinny_gemm_cpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y);
void skinny_gemm_gpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y, const Tensor& w_tiles = Tensor());
Tensor skinny_gemm_tiles_gpu(const Tensor& w);
int64_t skinny_gemm_tiles_bytes_gpu(const Tensor& w);
// Whether products of 2..16 rows take the tensor-core kernel on GPU d (CUDA sm_80+, ANVIL_SKINNY_MMA not 0).
bool skinny_gemm_has_mma(Device d);

}  // namespace anvil
