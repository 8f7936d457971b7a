// What the skinny GEMM's two GPU kernels share: skinny_gemm.cu (the fp32-FMA kernel for any row count, the fused
// norm / SwiGLU prologues, the dispatch) and skinny_gemm_mma.cu (the tensor-core kernel for 2..16 rows of 16-bit
// x). Design and measurements: docs/decode_kernels.md.
#pragma once
#include <cstdint>

#include "backends/gpu/common.cuh"

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

// The tensor-core kernel (skinny_gemm_mma.cu): runs the product and returns true when it takes it — plain x,
// 2..16 rows, bf16 x with bf16/e4m3 weights or f16 x with f16/e4m3 weights, on a GPU with 16-bit MMA, and
// ANVIL_SKINNY_MMA not 0 — else returns false having done nothing. w_vec: weight rows 16-byte aligned.
bool try_mma(const Params& p, DType wd, bool w_vec, Device dev);

}  // namespace anvil::skinny
