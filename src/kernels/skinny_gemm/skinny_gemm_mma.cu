// GPU skinny GEMM, tensor-core path: y (M, N) = x (M, K) @ w^T for 2 <= M <= 16 with 16-bit x, on GPUs whose
// vendor header provides the m16n8k16 MMA (ANVIL_HAS_MMA16816: CUDA sm_80+). Elsewhere (HIP) try_mma declines
// and the fp32-FMA kernel of skinny_gemm.cu takes every product. Shared pieces: skinny_gemm_gpu.cuh.
#include <cstdlib>

#include "kernels/skinny_gemm/skinny_gemm_gpu.cuh"  // first: common.cuh brings the vendor runtime core/ needs
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace skinny {

#ifdef ANVIL_HAS_MMA16816
// ---- Tensor-core path (CUDA sm_80+, 2 <= M <= 16, 16-bit x): design and predictions in docs/decode_kernels.md ----
// A warp owns a slab of 16 weight rows n0..n0+15 and multiplies it by x^T with mma.m16n8k16 (vendor helper
// anvil_mma16816): weights are the A operand (16 rows x 16 k), x^T the B operand (16 k x 8 activation rows), one
// MMA per 8 activation rows (MB = 8 or 16), f32 accumulation. Fragments (PTX layout, g = lane / 4, t = lane % 4):
// lane (g, t) loads 16 bytes of weight rows g and g+8 at k = pack base + t*E (E = 8 bf16/f16 or 16 fp8 values),
// so the 4 lanes of a group read 4*E contiguous k of one row. The k order inside one MMA is free as long as A and
// B agree, so a quad of 4 consecutive k of a lane (pack values 4q..4q+3) is one MMA's k slice: A regs 0/1 hold
// k 4q, 4q+1 of rows g / g+8 (the ISA's k 2t, 2t+1) and regs 2/3 hold 4q+2, 4q+3 (the ISA's 2t+8, 2t+9); B regs
// 0/1 hold the same k of x row g (+8 per group). Over t the 4 lanes supply 16 distinct k: an MMA per quad,
// E/4 per pack (2 bf16, 4 fp8). No data moves between lanes before the MMA. tools/emulate_skinny_mma.py checks
// this mapping against the ISA fragment tables on the CPU.
// x: read straight from global memory through L1 (anvil_load16_ro: every warp of the SM reads the same x, K*M*2
// bytes at most 458 KB, mostly L1 hits), while the weights bypass L1 (anvil_load16_stream): no shared-memory
// staging, no barrier in the loop. Rows >= M and k >= K read as zero.
// Loads in flight: a ring of U packs per row (2 rows x U x 16 B per lane, 4 KB per warp at U = 4): after the MMAs
// of pack u the lane reloads pack u of its next step, so about U packs per row stay in flight without a second
// register buffer. 8 warps x 4 KB x 2 blocks = 64 KB per SM, 3x the ~20 KB bandwidth-latency product.
// Warps per slab (wps): the warps of a block that share a slab take its steps round-robin and add their sums
// through shared memory in a fixed order at the end; blocks along grid.y split K for small N (partials to the
// f32 scratch, added by splitk_reduce_kernel): deterministic, no atomics.
// FP8: codes decoded into the MMA's 16-bit type in registers (fp8_pair_to_16), NaN codes flagged per row.
constexpr int kMmaU = 4;
static_assert(kWarp == kAnvilMmaLanes, "the m16n8k16 fragment layout is defined over 32 lanes");

// One weight pack of row `row` (a pointer, or null past N) at k; zero past ke.
template <class WT, bool VEC>
__device__ __forceinline__ void mma_load_w(const uint8_t* row, int k, int ke, uint32_t (&r)[4]) {
  if (row != nullptr && k < ke) {
    if constexpr (VEC) {
      const uint4 v = anvil_load16_stream(row + int64_t(k) * WT::kBytes);
      r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
    } else {
      load_pack<false>(row + int64_t(k) * WT::kBytes, (ke - k) * WT::kBytes, r);
    }
  } else {
    r[0] = r[1] = r[2] = r[3] = 0;
  }
}

// E 16-bit values of x row m at k (E/2 words, low half first); zero for rows >= M and past ke.
template <int E, bool VEC>
__device__ __forceinline__ void mma_load_x(const Params& p, int m, int k, int ke, uint32_t (&v)[E / 2]) {
  const uint16_t* x = static_cast<const uint16_t*>(p.x) + int64_t(m) * p.K + k;
  if (m < p.M && k < ke) {
    if constexpr (VEC) {
#pragma unroll
      for (int i = 0; i < E / 8; i++) {
        const uint4 u = anvil_load16_ro(x + 8 * i);
        v[4 * i] = u.x, v[4 * i + 1] = u.y, v[4 * i + 2] = u.z, v[4 * i + 3] = u.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < E / 2; i++) {
        const uint32_t a = k + 2 * i < ke ? x[2 * i] : 0u, b = k + 2 * i + 1 < ke ? x[2 * i + 1] : 0u;
        v[i] = a | (b << 16);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < E / 2; i++) v[i] = 0;
  }
}

// Grid (ceil(slabs / (kWarps / wps)), K splits). XBF16: the MMA (and x) type is bf16, else f16.
template <class WT, bool XBF16, int MB, bool VEC>
__global__ void __launch_bounds__(kThreads, 2) skinny_mma_kernel(Params p) {
  constexpr int E = 16 / WT::kBytes, Q = E / 4, PK = 4 * E, U = kMmaU, STEP = U * PK, MG = MB / 8;
  __shared__ float red[kWarps][MG * 4][kWarp];  // cross-warp sums, [warp][value][lane]: conflict-free
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, g = lane / 4, t = lane % 4;
  const int wps = p.wps, kw = warp % wps;
  const int n0 = (int(blockIdx.x) * (kWarps / wps) + warp / wps) * 16;
  const int kb = int(blockIdx.y) * p.k_split, ke = min(p.K, kb + p.k_split);
  const int nsteps = (ke - kb + STEP - 1) / STEP;
  const int64_t row_bytes = int64_t(p.K) * WT::kBytes;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const uint8_t* row_lo = n0 + g < p.N ? w + int64_t(n0 + g) * row_bytes : nullptr;
  const uint8_t* row_hi = n0 + g + 8 < p.N ? w + int64_t(n0 + g + 8) * row_bytes : nullptr;

  uint32_t wl[U][4], wh[U][4];  // the ring: pack u of rows g and g+8
  int s = kw;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int k = kb + s * STEP + u * PK + t * E;
    mma_load_w<WT, VEC>(s < nsteps ? row_lo : nullptr, k, ke, wl[u]);
    mma_load_w<WT, VEC>(s < nsteps ? row_hi : nullptr, k, ke, wh[u]);
  }
  anvil_wait_prior_grid();  // x is the previous kernel's output

  float acc[MG][4];
#pragma unroll
  for (int mg = 0; mg < MG; mg++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[mg][i] = 0.f;
  uint32_t nan_lo = 0, nan_hi = 0;
  for (; s < nsteps; s += wps) {
    const int sn = s + wps;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int kp = kb + s * STEP + u * PK;  // the pack's base: uniform over the warp (mma.sync needs all lanes)
      if (kp < ke) {
        const int k = kp + t * E;
        uint32_t xv[MG][E / 2];
#pragma unroll
        for (int mg = 0; mg < MG; mg++) mma_load_x<E, VEC>(p, mg * 8 + g, k, ke, xv[mg]);
#pragma unroll
        for (int q = 0; q < Q; q++) {
          uint32_t a[4];
          mma_quad<WT, XBF16>(wl[u], q, a[0], a[2], nan_lo);
          mma_quad<WT, XBF16>(wh[u], q, a[1], a[3], nan_hi);
#pragma unroll
          for (int mg = 0; mg < MG; mg++) {
            const uint32_t b[2] = {xv[mg][2 * q], xv[mg][2 * q + 1]};
            anvil_mma16816<XBF16>(acc[mg], a, b);
          }
        }
      }
      const int kn = kb + sn * STEP + u * PK + t * E;  // refill pack u from the next step
      mma_load_w<WT, VEC>(sn < nsteps ? row_lo : nullptr, kn, ke, wl[u]);
      mma_load_w<WT, VEC>(sn < nsteps ? row_hi : nullptr, kn, ke, wh[u]);
    }
  }

  if constexpr (is_fp8<WT>) {  // a NaN code anywhere in a row (over the 4 lanes of its group) makes it NaN
    nan_lo |= ANVIL_SHFL_XOR(nan_lo, 1, kWarp), nan_hi |= ANVIL_SHFL_XOR(nan_hi, 1, kWarp);
    nan_lo |= ANVIL_SHFL_XOR(nan_lo, 2, kWarp), nan_hi |= ANVIL_SHFL_XOR(nan_hi, 2, kWarp);
    const float qnan = bits_f32(0x7fc00000u);
#pragma unroll
    for (int mg = 0; mg < MG; mg++) {
      if (nan_lo) acc[mg][0] = acc[mg][1] = qnan;
      if (nan_hi) acc[mg][2] = acc[mg][3] = qnan;
    }
  }
  if (wps > 1) {  // the slab's warps kw = 0..wps-1 are consecutive; kw = 0 adds them in that order
#pragma unroll
    for (int mg = 0; mg < MG; mg++)
#pragma unroll
      for (int i = 0; i < 4; i++) red[warp][mg * 4 + i][lane] = acc[mg][i];
    __syncthreads();
    if (kw != 0) return;
#pragma unroll
    for (int mg = 0; mg < MG; mg++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float v = red[warp][mg * 4 + i][lane];
        for (int j = 1; j < wps; j++) v += red[warp + j][mg * 4 + i][lane];
        acc[mg][i] = v;
      }
  }
  // d[i]: weight row n0 + g + 8 * (i / 2), activation row 8 * mg + 2t + i % 2.
#pragma unroll
  for (int mg = 0; mg < MG; mg++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int m = mg * 8 + 2 * t + (i & 1), n = n0 + g + 8 * (i >> 1);
      if (m >= p.M || n >= p.N) continue;
      if (p.part) p.part[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = acc[mg][i];
      else store_y(p, int64_t(m) * p.N + n, acc[mg][i] * out_scale(p, n));
    }
}

template <class WT, bool XBF16, int MB, bool VEC>
void launch_mma(Params p, Device dev) {
  constexpr int E = 16 / WT::kBytes, STEP = kMmaU * 4 * E;
  const int cus = gpu::device_info(gpu::current_device()).compute_units;
  const int slabs = gpu::ceil_div(p.N, 16), steps = gpu::ceil_div(p.K, STEP);
  // One wave at 2 blocks of kWarps per SM: as many warps per slab (1..kWarps) as keep the grid within it, and
  // no more than a warp per step.
  const int64_t slots = 2 * int64_t(cus) * kWarps;
  int wps = 1;
  while (wps < kWarps && int64_t(slabs) * wps * 2 <= slots && wps * 2 <= steps) wps *= 2;
  p.wps = wps;
  const int gx = gpu::ceil_div(slabs, kWarps / wps);
  // Split K only when the column blocks fill less than one wave: at least one step per warp and split.
  int S = int(std::min<int64_t>(std::max<int64_t>(1, 2 * int64_t(cus) / gx), std::max(1, steps / wps)));
  p.k_split = gpu::ceil_div(gpu::ceil_div(p.K, S), STEP) * STEP;
  S = gpu::ceil_div(p.K, p.k_split);
  Tensor part;
  if (S > 1) {
    part = Tensor::empty({S, p.M, p.N}, DType::f32, dev);
    p.part = part.data<float>();
  }
  gpu::launch_early(skinny_mma_kernel<WT, XBF16, MB, VEC>, dim3(unsigned(gx), unsigned(S)), dim3(kThreads), 0, p);
  if (S > 1) {
    const int blocks = std::min(gpu::ceil_div(int64_t(p.M) * p.N, kThreads), 4 * cus);
    splitk_reduce_kernel<<<blocks, kThreads, 0, gpu::stream()>>>(p, S);
    ANVIL_LAUNCH_CHECK();
  }
}

template <class WT, bool XBF16>
void launch_mma_rows(const Params& p, bool vec, Device dev) {
  if (p.M <= 8) return vec ? launch_mma<WT, XBF16, 8, true>(p, dev) : launch_mma<WT, XBF16, 8, false>(p, dev);
  vec ? launch_mma<WT, XBF16, 16, true>(p, dev) : launch_mma<WT, XBF16, 16, false>(p, dev);
}

// ANVIL_SKINNY_MMA=0 keeps every product on the FMA kernel (A/B timing).
bool mma_enabled() {
  static const bool env = [] {
    const char* e = std::getenv("ANVIL_SKINNY_MMA");
    return !(e && e[0] == '0');
  }();
  return env;
}

// The MMA path, if this product may take it: plain x (the fused prologues compute x in f32 and stay on the FMA
// kernel), 2..16 rows, and every operand value exact in the MMA's 16-bit type: bf16 x with bf16 or e4m3 weights
// (bf16 MMA), f16 x with f16 or e4m3 weights (f16 MMA). f32 x and the mixed bf16/f16 pairs keep the FMA kernel
// (rounding x or f16 weights to bf16 would change the result). Returns false when not taken.
bool try_mma(const Params& p, DType wd, bool w_vec, Device dev) {
  if (p.pro != kProPlain || p.M < 2 || p.M > 16 || !mma_enabled()) return false;
  if (!gpu::device_info(gpu::current_device()).bf16_compute) return false;  // sm_80+ on CUDA
  const bool fp8 = wd == DType::e4m3fn || wd == DType::e4m3fnuz;
  const bool xbf = p.x_dtype == DType::bf16;
  if (!(xbf && (wd == DType::bf16 || fp8)) && !(p.x_dtype == DType::f16 && (wd == DType::f16 || fp8))) return false;
  const bool vec = w_vec && p.K % 8 == 0 && gpu::aligned16(p.x);
  switch (wd) {
    case DType::bf16: launch_mma_rows<WBf16, true>(p, vec, dev); break;
    case DType::f16: launch_mma_rows<WF16, false>(p, vec, dev); break;
    case DType::e4m3fn:
      xbf ? launch_mma_rows<WE4m3<false>, true>(p, vec, dev) : launch_mma_rows<WE4m3<false>, false>(p, vec, dev);
      break;
    default:
      xbf ? launch_mma_rows<WE4m3<true>, true>(p, vec, dev) : launch_mma_rows<WE4m3<true>, false>(p, vec, dev);
  }
  return true;
}
#else
// No m16n8k16 MMA in this vendor's header (HIP): every product takes the FMA kernel. See docs/decode_kernels.md.
bool try_mma(const Params&, DType, bool, Device) { return false; }
#endif

}  // namespace skinny

bool skinny_gemm_has_mma(Device d) {
#ifdef ANVIL_HAS_MMA16816
  return skinny::mma_enabled() && gpu::device_info(d.index).bf16_compute;
#else
  (void)d;
  return false;
#endif
}

}  // namespace anvil
