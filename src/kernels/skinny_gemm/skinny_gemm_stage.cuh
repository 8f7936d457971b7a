// The f16 staging of x before the skinny GEMM's ring (skinny_gemm_ring.cu): e4m3fn weights run on f16 MMAs, so
// bf16 x is converted to f16 times a power of two per row, once per product (stage_x_f16), or made and converted in
// one kernel from the norm or SwiGLU that produces it (stage_prologue_f16). The ring applies each row's inverse
// scale to y (Params::y_row_scale). Included by skinny_gemm_ring.cu only.
#pragma once
#include <cstdint>

#include "kernels/skinny_gemm/skinny_gemm_gpu.cuh"
#include "kernels/swiglu/swiglu_gpu.cuh"

namespace anvil {
namespace skinny {

#if defined(ANVIL_HAS_BULK_COPY) && defined(ANVIL_HAS_MMA16816)
// bf16 x to f16 for the f16 MMAs, times 2^sh per row (or piece): sh puts the largest finite |x|, given as bf16 bits,
// in [2^14, 2^15) (141 = 127 + 14), clamped to [-126, 126] so that 2^sh and 2^-sh are normal floats. Used by
// convert_x, stage_x_f16 and stage_prologue_f16, whose y rows take 2^-sh back.
__device__ __forceinline__ int x16_shift(unsigned max_bf16_bits) {
  return min(126, max(-126, 141 - int(max_bf16_bits >> 7)));
}
__device__ __forceinline__ float exp2_int(int e) { return __uint_as_float(uint32_t(127 + e) << 23); }
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t b, float scale) {
  return anvil_f16x2_rn(__uint_as_float(b << 16) * scale, __uint_as_float(b & 0xffff0000u) * scale);
}

// bf16 x (M, K) to f16 x16 (M, K) times 2^sh per row, once per product, for the f16 MMAs of e4m3fn weights
// (stage_x16; otherwise convert_x does it in every block, per piece and pass). sh puts the row's largest
// finite |x| in [2^14, 2^15), clamped to [-126, 126], as convert_x does over a piece: every value >= the max * 2^-28
// converts exactly, the rest err by < 2^-39 of the max. xinv[m] = 2^-sh, applied to y's row (Params::y_row_scale).
// One block of kStageThreads per row; K a multiple of 8 (the ring's rows are whole 64-value lines). The row is read
// once: each thread holds up to kStageHeld packs of 8 values in registers (rows up to 16384 values; longer ones read
// the rest twice), all loads in flight together, since the ring's consumers wait for this kernel to end.
constexpr int kStageThreads = 512;
constexpr int kStageHeld = 4;
__global__ void __launch_bounds__(kStageThreads) stage_x_f16(const uint16_t* x, int K, uint32_t* x16, float* xinv) {
  // Launched early: the ring launched after it may start now and put its first weights in flight while this runs;
  // the ring's own wait covers this kernel's writes, and this kernel's wait the writer of x.
  anvil_wait_prior_grid();
  anvil_allow_next_grid();
  const int m = int(blockIdx.x), t = int(threadIdx.x);
  const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(m) * K);
  uint4* out = reinterpret_cast<uint4*>(x16 + int64_t(m) * K / 2);
  const int packs = K / 8;
  unsigned mx = 0;  // |x| as bf16 bits, which order as integers; NaN (> 0x7f80) left out
  auto fold = [&mx](const uint4& v) {
    for (uint32_t w : {v.x, v.y, v.z, v.w}) {
      const unsigned lo = w & 0x7fffu, hi = (w >> 16) & 0x7fffu;
      mx = max(mx, lo > 0x7f80u ? 0u : lo), mx = max(mx, hi > 0x7f80u ? 0u : hi);
    }
  };
  uint4 held[kStageHeld];
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) {
    const int i = t + j * kStageThreads;
    held[j] = i < packs ? row[i] : make_uint4(0, 0, 0, 0);  // zeros leave the max alone
  }
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) fold(held[j]);
  for (int i = t + kStageHeld * kStageThreads; i < packs; i += kStageThreads) fold(row[i]);
  __shared__ unsigned red[kStageThreads / kWarp];
  for (int o = kWarp / 2; o > 0; o /= 2) mx = max(mx, unsigned(ANVIL_SHFL_XOR(mx, o, kWarp)));
  if (t % kWarp == 0) red[t / kWarp] = mx;
  __syncthreads();
  mx = 0;
  for (int w = 0; w < kStageThreads / kWarp; w++) mx = max(mx, red[w]);
  const int sh = x16_shift(mx);
  const float scale = exp2_int(sh);
  auto f16x8 = [scale](const uint4& v) {  // eight bf16 to eight f16, times the scale
    return make_uint4(bf16x2_to_f16x2(v.x, scale), bf16x2_to_f16x2(v.y, scale), bf16x2_to_f16x2(v.z, scale),
                      bf16x2_to_f16x2(v.w, scale));
  };
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) {
    const int i = t + j * kStageThreads;
    if (i < packs) out[i] = f16x8(held[j]);
  }
  for (int i = t + kStageHeld * kStageThreads; i < packs; i += kStageThreads) out[i] = f16x8(row[i]);
  if (t == 0) xinv[m] = exp2_int(-sh);
}

// The fused prologues (SkinnyPrologue; skinny_gemm_fused) computed once per product by the same staging, so the
// norm or SwiGLU that made x and the f16 copy are one kernel instead of two: bf16 inputs, one block per row, the
// row's f32 x held in registers (K <= kStagePrologueMaxK). norm: h = a (+ b, rounded to bf16 as add_rms_norm
// stores it, written to h_out), x = h * gamma, and y's row takes rstd * 2^-sh (the fused kernels' contract: x not
// rounded to 16 bits before the product, 1/rms applied to the sums); swiglu: x = silu(gate) * up, y's row 2^-sh.
constexpr int kStagePrologueMaxK = kStageThreads * kStageHeld * 8;
template <bool GLU>
__global__ void __launch_bounds__(kStageThreads) stage_prologue_f16(const uint16_t* a, const uint16_t* b,
                                                                    const uint16_t* gamma, uint16_t* h_out, int K,
                                                                    float eps, uint32_t* x16, float* row_scale) {
  anvil_wait_prior_grid();  // as stage_x_f16
  anvil_allow_next_grid();
  const int m = int(blockIdx.x), t = int(threadIdx.x), packs = K / 8;
  const int64_t ld = GLU ? 2 * int64_t(K) : K;  // gu rows hold gate then up
  const uint4* ra = reinterpret_cast<const uint4*>(a + int64_t(m) * ld);
  const uint4* ru = reinterpret_cast<const uint4*>(a + int64_t(m) * ld + K);  // swiglu: up
  const uint4* rb = b ? reinterpret_cast<const uint4*>(b + int64_t(m) * K) : nullptr;  // norm: b, h_out or neither
  const uint4* rg = reinterpret_cast<const uint4*>(gamma);
  uint4* rh = b ? reinterpret_cast<uint4*>(h_out + int64_t(m) * K) : nullptr;
  auto lo = [](uint32_t w) { return __uint_as_float(w << 16); };
  auto hi = [](uint32_t w) { return __uint_as_float(w & 0xffff0000u); };
  // Every load first (a's packs, then up's or b's and gamma's), so all are in flight together: computing between
  // them would leave the loads behind the h_out stores, which the compiler must assume may alias them.
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 pa[kStageHeld], pb[kStageHeld], pg[kStageHeld];
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) {
    const int i = t + j * kStageThreads;
    const bool in = i < packs;
    pa[j] = in ? ra[i] : zero;
    pb[j] = in && (GLU || b) ? (GLU ? ru[i] : rb[i]) : zero;
    pg[j] = in && !GLU ? rg[i] : zero;
  }
  float v[kStageHeld][8];
  float ss = 0.f, mx = 0.f;  // sum of h^2 (norm); max finite |x| (fmaxf drops NaN); packs past K are zeros
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) {
    const int i = t + j * kStageThreads;
    const uint32_t w0[4] = {pa[j].x, pa[j].y, pa[j].z, pa[j].w}, w1[4] = {pb[j].x, pb[j].y, pb[j].z, pb[j].w};
    if constexpr (GLU) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        v[j][2 * e] = swiglu_f32<bf16>(lo(w0[e]), lo(w1[e]));
        v[j][2 * e + 1] = swiglu_f32<bf16>(hi(w0[e]), hi(w1[e]));
      }
    } else {
      float h[8];
#pragma unroll
      for (int e = 0; e < 4; e++) h[2 * e] = lo(w0[e]), h[2 * e + 1] = hi(w0[e]);
      if (b) {
        uint32_t hb[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const uint32_t l = from_f32<bf16>(h[2 * e] + lo(w1[e])).bits;
          const uint32_t u = from_f32<bf16>(h[2 * e + 1] + hi(w1[e])).bits;
          hb[e] = l | (u << 16);
          h[2 * e] = lo(l), h[2 * e + 1] = lo(u);
        }
        if (i < packs) rh[i] = make_uint4(hb[0], hb[1], hb[2], hb[3]);
      }
      const uint32_t wg[4] = {pg[j].x, pg[j].y, pg[j].z, pg[j].w};
#pragma unroll
      for (int e = 0; e < 8; e++) {
        ss = fmaf(h[e], h[e], ss);
        v[j][e] = h[e] * (e % 2 ? hi(wg[e / 2]) : lo(wg[e / 2]));
      }
    }
#pragma unroll
    for (int e = 0; e < 8; e++) mx = fmaxf(mx, fabsf(v[j][e]));
  }
  __shared__ float red_mx[kStageThreads / kWarp], red_ss[kStageThreads / kWarp];
  for (int o = kWarp / 2; o > 0; o /= 2) {
    mx = fmaxf(mx, ANVIL_SHFL_XOR(mx, o, kWarp));
    ss += ANVIL_SHFL_XOR(ss, o, kWarp);
  }
  if (t % kWarp == 0) red_mx[t / kWarp] = mx, red_ss[t / kWarp] = ss;
  __syncthreads();
  mx = 0.f, ss = 0.f;
  for (int w = 0; w < kStageThreads / kWarp; w++) mx = fmaxf(mx, red_mx[w]), ss += red_ss[w];  // fixed order
  // The max's top 16 bits are its bf16 truncation, which has its exponent (an inf max gives the smallest shift; a
  // zero row the largest).
  const int sh = x16_shift(__float_as_uint(mx) >> 16);
  const float scale = exp2_int(sh);
  uint4* out = reinterpret_cast<uint4*>(x16 + int64_t(m) * K / 2);
#pragma unroll
  for (int j = 0; j < kStageHeld; j++) {
    const int i = t + j * kStageThreads;
    if (i >= packs) continue;
    uint32_t o[4];
#pragma unroll
    for (int e = 0; e < 4; e++) o[e] = anvil_f16x2_rn(v[j][2 * e] * scale, v[j][2 * e + 1] * scale);
    out[i] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  if (t == 0) {
    row_scale[m] = GLU ? exp2_int(-sh) : rsqrtf(ss / float(K) + eps) * exp2_int(-sh);
  }
}

#endif  // ANVIL_HAS_BULK_COPY && ANVIL_HAS_MMA16816

}  // namespace skinny
}  // namespace anvil
