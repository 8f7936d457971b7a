// What the skinny GEMM's two GPU kernels share: skinny_gemm.cu (the fp32-FMA kernel for any row count, the fused
// norm / SwiGLU prologues, the dispatch) and skinny_gemm_mma.cu (the tensor-core kernel for 2..16 rows of 16-bit
// x). Design and measurements: docs/decode_kernels.md.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/gpu/common.cuh"
#include "core/tensor.h"

namespace anvil::skinny {

constexpr int kThreads = 256;  // 8 warps of 32 or 4 wavefronts of 64
constexpr int kWarp = gpu::kWarpSize;
constexpr int kWarps = kThreads / kWarp;

// Weight formats (16 bytes per pack).
struct WBf16 { static constexpr int kBytes = 2; };
struct WF16 { static constexpr int kBytes = 2; };
template <bool FNUZ>
struct WE4m3 { static constexpr int kBytes = 1; };
template <class WT>
constexpr bool is_fp8 = WT::kBytes == 1;

struct Params {
  const void* x;
  DType x_dtype;
  const void* w;
  const uint8_t* w_tiles;  // ring kernel: w pre-tiled for its grid (gpu::ring::pretile), or null (tensor map)
  const float* y_row_scale;  // ring kernel: (M), y's row m times it (x staged as f16 times 2^sh per row), or null
  void* y;
  DType y_dtype;
  float* part;           // (S, M, N) f32 split-K partial sums, or null: the kernel writes y
  const float* x_scale;  // (1) or null
  const float* w_scale;  // (1) or (N), or null
  int w_scale_stride;    // 1: per output channel, 0: per tensor
  float alpha;
  int M, N, K;
  int k_split;  // k-values per grid.y slice, a multiple of the step
  int kc;       // k-values per staged x chunk, a multiple of the step, <= k_split
  int wps;      // MMA kernel: warps per 16-row slab (they split the block's K range step by step)
  // Fused x staging (SkinnyPrologue in skinny_gemm.h): what `x` is and what the staging computes from it.
  int pro;            // kProPlain, kProNorm (x = a), kProSwiglu (x = gu, rows of 2K)
  const void* nb;     // norm: the branch added to a (h = a + nb), or null
  const void* gamma;  // norm: (K), x's dtype
  void* h_out;        // norm with nb: (M, K) receives h; written by the blocks of column block 0
  float eps;
  bool vec4;  // every x-side pointer 8/16-byte aligned and K % 4 == 0: quads of x load as one access
};
constexpr int kProPlain = 0, kProNorm = 1, kProSwiglu = 2;

// One pack (16 bytes) of a weight row from byte `p`: a 16-byte load when VEC (row and K aligned), else byte by
// byte with the bytes past `nbytes` zero (K tails, misaligned rows).
template <bool VEC>
__device__ __forceinline__ void load_pack(const uint8_t* p, int nbytes, uint32_t (&r)[4]) {
  if constexpr (VEC) {
    const auto v = gpu::load_pack(reinterpret_cast<const uint32_t*>(p));
#pragma unroll
    for (int i = 0; i < 4; i++) r[i] = v.v[i];
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) r[i] = 0;
#pragma unroll
    for (int i = 0; i < 16; i++)
      if (i < nbytes) r[i / 4] |= uint32_t(p[i]) << (8 * (i % 4));
  }
}

// alpha * x_scale * w_scale[n]: applied once to the f32 sum.
__device__ __forceinline__ float out_scale(const Params& p, int n) {
  float s = p.alpha;
  if (p.x_scale) s *= *p.x_scale;
  if (p.w_scale) s *= p.w_scale[int64_t(n) * p.w_scale_stride];
  return s;
}
__device__ __forceinline__ void store_y(const Params& p, int64_t i, float v) {
  if (p.y_dtype == DType::f32) static_cast<float*>(p.y)[i] = v;
  else if (p.y_dtype == DType::bf16) static_cast<bf16*>(p.y)[i] = from_f32<bf16>(v);
  else static_cast<f16*>(p.y)[i] = from_f32<f16>(v);
}

// y = scales * (sum of the S partial sums, in order s = 0, 1, ...). static: each kernel file has its own copy
// (the tensor-core file of a HIP build, which has no tensor-core kernel, none that it uses).
[[maybe_unused]] static __global__ void __launch_bounds__(kThreads) splitk_reduce_kernel(Params p, int S) {
  const int64_t total = int64_t(p.M) * p.N;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    float s = 0.f;
    for (int j = 0; j < S; j++) s += p.part[j * total + i];
    store_y(p, i, s * out_scale(p, int(i % p.N)));
  }
}

#ifdef ANVIL_HAS_MMA16816
// ---- m16n8k16 fragments of weight packs, shared by the tensor-core kernel and the ring kernel ----------------
// Two fp8 codes (bytes b0 at bits 8..15 and b1 at 24..31 of x, the rest zero) to two 16-bit values in the MMA's
// type, exactly: the 7 magnitude bits land in the exponent/mantissa fields (bf16: bits 4..10, f16: bits 7..13),
// giving value * 2^-120 (bf16, e4m3fn: biases 127 vs 7), 2^-119 (bf16, fnuz: bias 8), 2^-8 / 2^-7 (f16, bias 15),
// subnormal codes included (they land on subnormals of the same scale), then one fma.rn x2 by the power of two
// restores the value: every e4m3 value is a normal bf16 and f16 value, so it is exact. NaN codes come out finite
// and are flagged separately.
template <bool FNUZ, bool XBF16>
__device__ __forceinline__ uint32_t fp8_pair_to_16(uint32_t x) {
  constexpr int kShift = XBF16 ? 4 : 1;
  constexpr uint32_t kMul = XBF16 ? (FNUZ ? 0x7B007B00u : 0x7B807B80u) : (FNUZ ? 0x58005800u : 0x5C005C00u);
  return anvil_mul2_16<XBF16>(((x & 0x7f007f00u) >> kShift) | (x & 0x80008000u), kMul);
}

// Quad q (k 4q..4q+3 of the pack r) as two registers of 16-bit pairs: lo = k 4q, 4q+1, hi = k 4q+2, 4q+3.
template <class WT, bool XBF16>
__device__ __forceinline__ void mma_quad(const uint32_t (&r)[4], int q, uint32_t& lo, uint32_t& hi, uint32_t& nan) {
  if constexpr (!is_fp8<WT>) {
    lo = r[2 * q], hi = r[2 * q + 1];
  } else {
    constexpr bool kFnuz = std::is_same<WT, WE4m3<true>>::value;
    const uint32_t w = r[q];
    lo = fp8_pair_to_16<kFnuz, XBF16>(__byte_perm(w, 0u, 0x1404u));  // bytes 0, 1 -> bits 8..15, 24..31
    hi = fp8_pair_to_16<kFnuz, XBF16>(__byte_perm(w, 0u, 0x3424u));  // bytes 2, 3
    if constexpr (kFnuz) {
      const uint32_t z = w ^ 0x80808080u;
      nan |= (z - 0x01010101u) & ~z & 0x80808080u;
    } else {
      nan |= ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
    }
  }
}

#endif  // ANVIL_HAS_MMA16816

// The tensor-core kernel (skinny_gemm_mma.cu): runs the product and returns true when it takes it — plain x,
// 2..16 rows, bf16 x with bf16/e4m3 weights or f16 x with f16/e4m3 weights, on a GPU with 16-bit MMA, and
// ANVIL_SKINNY_MMA not 0 — else returns false having done nothing. w_vec: weight rows 16-byte aligned.
bool try_mma(const Params& p, DType wd, bool w_vec, Device dev);

// The ring kernel (skinny_gemm_ring.cu): the same contract as try_mma for 1..16 rows (e4m3fn: not one row of a
// small weight; e4m3fnuz: 9..16), and 17..32 rows of e4m3fn w with f16 x or staged bf16 x (ring_wide), on CUDA
// sm_90+ (bulk copies and tensor maps), 16-byte aligned x and w, rows of w a multiple of 128 bytes, and
// ANVIL_SKINNY_RING not 0 (2: every row count).
bool try_ring(const Params& p, DType wd);
// Whether the ring takes M > 16 rows of xd x against an (N, K) weight of wd in one pass (alignment aside).
bool ring_wide(int M, int N, int K, DType wd, DType xd);
// Whether a fused prologue (kProNorm, kProSwiglu) of M rows of xd inputs would run in the ring kernel's f16 staging
// (one kernel for the prologue and the copy, then the ring): e4m3fn w (N, K), bf16 inputs, from 2 rows (stage_x16).
bool skinny_fused_stages(int M, int N, int K, DType wd, DType xd);
// w (N, K) pre-tiled for the ring kernel on the current GPU (Params::w_tiles), or an undefined tensor where the
// ring never reads w (no bulk copies, rows not whole 128-byte lines, a weight dtype it does not take).
Tensor ring_tiles(const Tensor& w);
int64_t ring_tiles_bytes(const Tensor& w);  // ring_tiles(w)'s size, or 0 where it is undefined

}  // namespace anvil::skinny
