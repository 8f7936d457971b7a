// Portable tiled GEMM: shared-memory tiles, a register block per thread, fp32 accumulation on the FMA units.
// One source for CUDA and HIP (no tensor-core intrinsics: those are vendor-specific; cuBLASLt provides them on
// NVIDIA). Any M, N, K (tails are zero-filled on load and masked on store), any transpose (strides), alpha/beta,
// and FP8 operands decoded through a 256-entry table in shared memory (any e4m3/e5m2 flavour, fn or fnuz).
//
// Per block: a BM x BN tile of c; each k-step stages a BK-deep slice of A and B in shared memory, converted to
// f32 once (so bf16/f16/fp8 cost the same inner loop), double-buffered through registers so the next slice's
// global loads are in flight while this slice is multiplied: one __syncthreads per k-step.
// Per thread: TM x TN outputs; per k: TM/4 + TN/4 16-byte shared loads feed TM*TN FMAs (8x8: 4 loads, 64 FMAs).
#include <type_traits>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/matmul/matmul_tiled.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;  // 8 warps of 32 or 4 wavefronts of 64; also one thread per LUT entry

// A kernel's whole configuration. Each thread's TM x TN outputs are (TM/4) x (TN/4) groups of 4x4, the groups
// SM rows / SN columns apart, so one warp's 16-byte shared reads cover distinct consecutive addresses
// (conflict-free) or the same address (broadcast).
template <int BM_, int BN_, int TM_, int TN_>
struct TileCfg {
  static constexpr int BM = BM_, BN = BN_, BK = 16, TM = TM_, TN = TN_;
  static constexpr int TX = BN / TN, TY = BM / TM;  // thread grid, 16 x 16
  static_assert(TX * TY == kThreads, "one thread per TM x TN block");
  static constexpr int GM = TM / 4, GN = TN / 4;
  static constexpr int SM = BM / GM, SN = BN / GN;
  static constexpr int LA = BM * BK / kThreads, LB = BN * BK / kThreads;  // elements each thread stages
  static constexpr int PAD = 4;  // rows stay 16-byte aligned; k-fast stores spread over banks (2-way at most)
};
using BigTile = TileCfg<128, 128, 8, 8>;   // 64 accumulators per thread, ~34 KB shared
using SmallTile = TileCfg<64, 64, 4, 4>;   // for grids too small to fill the device with 128x128 tiles

struct Params {
  const void* a;
  int64_t sam, sak;
  const void* b;
  int64_t sbk, sbn;
  void* c;
  int M, N, K;
  float alpha, beta;
  const float* scale_a;
  const float* scale_n;
  int scale_m_stride, scale_n_stride;
  Fp8Format fmt_a, fmt_b;
  int64_t bsa, bsb, bsc;  // batch strides (elements); blockIdx.z is the product
};

template <class T>
__device__ __forceinline__ float load_f32(const T* p, int64_t i, const float*) {
  return to_f32(p[i]);
}
__device__ __forceinline__ float load_f32(const uint8_t* p, int64_t i, const float* lut) { return lut[p[i]]; }

// Where this thread's staged elements sit in a BMN x BK slice. Consecutive threads walk the operand's contiguous
// dimension, so each global load instruction is coalesced whichever way the operand is stored. Element i of the
// thread is (mn + i * dmn, k + i * dk): one base and one step, whatever the layout (few live registers).
struct Stage {
  int mn, k, dmn, dk;
};
template <int BMN, int BK>
__device__ __forceinline__ Stage stage_of(bool kfast) {
  const int t = int(threadIdx.x);
  if (kfast) return {t / BK, t % BK, kThreads / BK, 0};
  return {t % BMN, t / BMN, 0, kThreads / BMN};
}

// Global -> registers: element (mn, k) of an operand is x[mn * s_mn + k * s_k]; out of range reads as 0.
template <int L, class T>
__device__ __forceinline__ void load_slice(const T* x, int64_t s_mn, int64_t s_k, Stage st, int mn0, int k0, int MN,
                                           int K, const float* lut, float (&r)[L]) {
#pragma unroll
  for (int i = 0; i < L; i++) {
    const int gmn = mn0 + st.mn + i * st.dmn, gk = k0 + st.k + i * st.dk;
    r[i] = (gmn < MN && gk < K) ? load_f32(x, int64_t(gmn) * s_mn + int64_t(gk) * s_k, lut) : 0.f;
  }
}
// Registers -> shared, stored k-major: s[k][mn].
template <int L, int LD>
__device__ __forceinline__ void store_slice(float (*s)[LD], Stage st, const float (&r)[L]) {
#pragma unroll
  for (int i = 0; i < L; i++) s[st.k + i * st.dk][st.mn + i * st.dmn] = r[i];
}

template <class TA, class TB, class TO, class Cfg>
__global__ void __launch_bounds__(kThreads) gemm_tiled_kernel(Params p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr bool kFp8A = std::is_same<TA, uint8_t>::value, kFp8B = std::is_same<TB, uint8_t>::value;
  __shared__ __align__(16) float As[2][BK][BM + Cfg::PAD];
  __shared__ __align__(16) float Bs[2][BK][BN + Cfg::PAD];
  __shared__ float lut[2][256];  // fp8 decode tables of a and b (unused otherwise)

  const int tid = int(threadIdx.x), tx = tid % Cfg::TX, ty = tid / Cfg::TX;
  const int m0 = int(blockIdx.y) * BM, n0 = int(blockIdx.x) * BN;
  if constexpr (kFp8A) lut[0][tid] = fp8_to_f32(uint8_t(tid), p.fmt_a);
  if constexpr (kFp8B) lut[1][tid] = fp8_to_f32(uint8_t(tid), p.fmt_b);
  if constexpr (kFp8A || kFp8B) __syncthreads();

  const TA* a = static_cast<const TA*>(p.a) + int64_t(blockIdx.z) * p.bsa;
  const TB* b = static_cast<const TB*>(p.b) + int64_t(blockIdx.z) * p.bsb;
  // Which of an operand's two dimensions is contiguous decides the staging order (see stage_of).
  const Stage sa = stage_of<BM, BK>(p.sak == 1), sb = stage_of<BN, BK>(p.sbk == 1);
  float ra[Cfg::LA], rb[Cfg::LB];
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

  const int ntiles = (p.K + BK - 1) / BK;
  if (ntiles > 0) {
    load_slice(a, p.sam, p.sak, sa, m0, 0, p.M, p.K, lut[0], ra);
    load_slice(b, p.sbn, p.sbk, sb, n0, 0, p.N, p.K, lut[1], rb);
    store_slice(As[0], sa, ra);
    store_slice(Bs[0], sb, rb);
    __syncthreads();
  }
  for (int t = 0; t < ntiles; t++) {
    const int buf = t & 1;
    const bool more = t + 1 < ntiles;
    if (more) {  // next slice's global loads overlap this slice's FMAs
      load_slice(a, p.sam, p.sak, sa, m0, (t + 1) * BK, p.M, p.K, lut[0], ra);
      load_slice(b, p.sbn, p.sbk, sb, n0, (t + 1) * BK, p.N, p.K, lut[1], rb);
    }
    // Unrolled by 4, not 16: fully unrolled, gfx90a's scheduler hoists all 64 shared reads of the slice
    // (256 VGPRs, 200-800 spilled); by 4 it needs 226 VGPRs, no spills. nvcc: 170 registers, no spills.
#pragma unroll 4
    for (int kk = 0; kk < BK; kk++) {
      float af[TM], bf[TN];
#pragma unroll
      for (int g = 0; g < Cfg::GM; g++) {
        const float4 v = *reinterpret_cast<const float4*>(&As[buf][kk][g * Cfg::SM + ty * 4]);
        af[g * 4 + 0] = v.x, af[g * 4 + 1] = v.y, af[g * 4 + 2] = v.z, af[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < Cfg::GN; g++) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][kk][g * Cfg::SN + tx * 4]);
        bf[g * 4 + 0] = v.x, bf[g * 4 + 1] = v.y, bf[g * 4 + 2] = v.z, bf[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
    }
    if (more) {  // the other buffer was last read in step t-1, which every thread finished before our last sync
      store_slice(As[buf ^ 1], sa, ra);
      store_slice(Bs[buf ^ 1], sb, rb);
    }
    __syncthreads();
  }

  // Epilogue: scales, beta * c (never read when beta == 0), one rounding into TO.
  TO* c = static_cast<TO*>(p.c) + int64_t(blockIdx.z) * p.bsc;
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const int m = m0 + (i / 4) * Cfg::SM + ty * 4 + i % 4;
    if (m >= p.M) continue;
    const float s = p.scale_a ? p.alpha * p.scale_a[int64_t(m) * p.scale_m_stride] : p.alpha;
#pragma unroll
    for (int j = 0; j < TN; j++) {
      const int n = n0 + (j / 4) * Cfg::SN + tx * 4 + j % 4;
      if (n >= p.N) continue;
      float v = acc[i][j] * s;
      if (p.scale_n) v *= p.scale_n[int64_t(n) * p.scale_n_stride];
      const int64_t o = int64_t(m) * p.N + n;
      if (p.beta != 0.f) v += p.beta * to_f32(c[o]);
      c[o] = from_f32<TO>(v);
    }
  }
}

template <class Cfg, class TA, class TB, class TO>
void launch_cfg(const Params& p, int64_t batch) {
  const int gy = gpu::ceil_div(p.M, Cfg::BM);
  ANVIL_CHECK(gy <= 65535, "matmul_tiled", str("M <= ", 65535 * Cfg::BM, " (grid y limit)"), p.M);
  ANVIL_CHECK(batch <= 65535, "matmul_tiled", "a batch of at most 65535 products (grid z limit)", batch);
  dim3 grid(unsigned(gpu::ceil_div(p.N, Cfg::BN)), unsigned(gy), unsigned(batch));
  gemm_tiled_kernel<TA, TB, TO, Cfg><<<grid, kThreads, 0, gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}

// 128x128 tiles when they give at least one block per SM/CU, else 64x64 (4x the blocks for small problems).
template <class TA, class TB, class TO>
void launch(const Params& p, int64_t batch) {
  const int64_t big_blocks = batch * gpu::ceil_div(p.M, BigTile::BM) * gpu::ceil_div(p.N, BigTile::BN);
  if (big_blocks >= gpu::device_info(gpu::current_device()).compute_units)
    return launch_cfg<BigTile, TA, TB, TO>(p, batch);
  launch_cfg<SmallTile, TA, TB, TO>(p, batch);
}

}  // namespace

void matmul_tiled(const TiledGemm& g) {
  if (g.M == 0 || g.N == 0) return;
  if (g.batch == 0) return;
  Params p{g.a,       g.sam,     g.sak,           g.b,  g.sbk,   g.sbn,   g.c,     g.M,
           g.N,       g.K,       g.alpha,         g.beta, g.scale_a, g.scale_n, g.scale_m_stride, g.scale_n_stride,
           fp8_format(g.a_dtype), fp8_format(g.b_dtype), g.bsa, g.bsb, g.bsc};
  const int64_t nb = g.batch;
  const DType A = g.a_dtype, B = g.b_dtype, C = g.c_dtype;
  if (A == B && !dtype_is_fp8(A)) {
    ANVIL_DISPATCH_FLOAT(A, T, {
      if (C == A) return launch<T, T, T>(p, nb);
      if (C == DType::f32) return launch<T, T, float>(p, nb);
    });
  } else if (dtype_is_fp8(B) && dtype_is_fp8(A)) {
    if (C == DType::bf16) return launch<uint8_t, uint8_t, bf16>(p, nb);
    if (C == DType::f32) return launch<uint8_t, uint8_t, float>(p, nb);
  } else if (dtype_is_fp8(B) && A == DType::bf16) {  // weight-only FP8
    if (C == DType::bf16) return launch<bf16, uint8_t, bf16>(p, nb);
    if (C == DType::f32) return launch<bf16, uint8_t, float>(p, nb);
  }
  ANVIL_THROW("matmul_tiled", "(a, b, c) dtypes (T, T, T|f32) for T in f32/bf16/f16, or (fp8|bf16, fp8, bf16|f32)",
              str("(", dtype_name(A), ", ", dtype_name(B), ", ", dtype_name(C), ")"));
}

}  // namespace anvil
