// GPU skinny GEMM: y (M, N) = x (M, K) @ w^T for M <= 16, a weight-streaming kernel with fp32 FMAs, the fused
// norm / SwiGLU stagings, and the dispatch (2..16 rows of 16-bit x go to the tensor-core kernel of
// skinny_gemm_mma.cu where the GPU has one). Design and measured numbers: docs/decode_kernels.md. At M = 1..16 every weight byte is used M times, so the product is bound by reading w
// once from HBM (16 MB per 4096 x 4096 bf16 matrix): the kernel exists to keep enough 16-byte loads in flight.
//
// Work split. A block is kThreads threads = kWarps warps; each warp owns NC consecutive output columns (weight
// rows) and its lanes stride over K in 16-byte packs (8 bf16/f16 or 16 fp8 weights), so one warp-wide load reads
// kWarp * 16 contiguous bytes of one row. Per step a lane loads U packs of each of its NC rows (U*NC = 4), and
// the next step's loads are issued before this step's FMAs (register double buffer): 128 bytes in flight per
// lane, 4 KB per warp of 32, 32-64 KB per SM at 1-2 blocks.
// x. Staged in shared memory as f32, (MB, kc) per chunk of kc k-values, converted once (so the inner loop is the
// same for f32/bf16/f16 activations), zero-filled for rows M..MB and beyond K. Chunks of kc <= 12288 / MB keep it
// within 48 KB (no opt-in on NVIDIA, within the 64 KB LDS on AMD); a block walks its K range chunk by chunk, and
// the first W loads of a chunk are in flight while it stages x. Reading x from L1/L2 instead would cost M 16-byte
// loads per weight pack with no reuse across a warp's columns, and the weight stream evicts it from L1.
// Split-K. When the column blocks alone cannot keep enough weight bytes in flight (small N: e.g. N = 1024 at
// 32 columns per block is 32 blocks for 132 SMs), grid.y splits K; the partial sums go to an f32 scratch (S, M, N)
// and a second kernel adds them in a fixed order: deterministic, no atomics, no zeroing. The Llama-8B shapes
// (N >= 4096) need no split on an H200 at M = 1, 4, 16, so they run as one kernel.
// Reduction across the warp: the MB*NC per-lane sums are reduce-scattered (each butterfly step sends half of the
// remaining values), MB*NC - 1 shuffles instead of MB*NC*log2(kWarp).
#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <type_traits>

#include "backends/gpu/common.cuh"
#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/skinny_gemm/skinny_gemm.h"
#include "kernels/skinny_gemm/skinny_gemm_gpu.cuh"
#include "kernels/swiglu/swiglu_gpu.cuh"

namespace anvil {
namespace {

using namespace skinny;

constexpr int kSmemFloats = 12288;  // 48 KB of f32 x per block: NVIDIA's limit without opt-in

// Per MB (rows rounded up to 1, 4, 8, 16): NC columns per warp, U packs per column per step, whether the next
// step's loads are issued before this step's FMAs (DB: a second register buffer), and the blocks per SM the
// registers are capped for (2: 128 registers per thread on sm_90). NC*U = 4 loads per buffer. Each 16-byte
// shared read of x feeds 4*NC FMAs, so from MB=4 up NC=4: with f32 x that is 8 (fp8 w) or 4 (bf16 w) bytes of
// shared memory per weight byte at MB=4, half of sm_90's 128 B/clk when HBM delivers its ~16 B/clk per SM.
// MB=8 and MB=16 (32 and 64 accumulators) do not fit 128 registers with both buffers (sm_90 spilled 24-280
// bytes; MB=8 without the second buffer still spilled 8-24 bytes with fp8), so they run one block per SM, both
// buffers, up to 255 registers: 8 warps x 4 KB in flight per SM, and at MB >= 8 the FMAs bound the time anyway.
template <int MB> struct Cfg;
template <> struct Cfg<1> { static constexpr int NC = 2, U = 2, kMinBlocks = 2; static constexpr bool DB = true; };
template <> struct Cfg<4> { static constexpr int NC = 4, U = 1, kMinBlocks = 2; static constexpr bool DB = true; };
template <> struct Cfg<8> { static constexpr int NC = 4, U = 1, kMinBlocks = 1; static constexpr bool DB = true; };
template <> struct Cfg<16> { static constexpr int NC = 4, U = 1, kMinBlocks = 1; static constexpr bool DB = true; };


// Four consecutive weights (k = 4q .. 4q+3 of a pack) decoded to f32. FP8 by bit placement: the 7 magnitude
// bits land in the f32 exponent/mantissa so that the value is 2^-120 (fn, bias 7) or 2^-119 (fnuz, bias 8) times
// the weight, subnormals included (f32 subnormals are kept: no -ftz), then one multiply; 4-5 integer ops per
// weight instead of a 256-entry table (shared-memory bank conflicts). NaN codes would decode as finite numbers,
// so they set `nan` instead (per 4 bytes: 3-4 integer ops). Where the vendor header has a hardware e4m3
// conversion (ANVIL_HAS_E4M3_CVT: sm_89+), e4m3fn takes it instead: 1.5 instructions per weight.
template <class WT>
__device__ __forceinline__ void decode_quad(const uint32_t (&r)[4], int q, float (&f)[4], uint32_t& nan) {
  if constexpr (std::is_same<WT, WBf16>::value) {
    const uint32_t a = r[2 * q], b = r[2 * q + 1];
    f[0] = bits_f32(a << 16), f[1] = bits_f32(a & 0xffff0000u);
    f[2] = bits_f32(b << 16), f[3] = bits_f32(b & 0xffff0000u);
  } else if constexpr (std::is_same<WT, WF16>::value) {
    const uint32_t a = r[2 * q], b = r[2 * q + 1];
    f[0] = f16_to_f32(uint16_t(a & 0xffffu)), f[1] = f16_to_f32(uint16_t(a >> 16));
    f[2] = f16_to_f32(uint16_t(b & 0xffffu)), f[3] = f16_to_f32(uint16_t(b >> 16));
  } else {
    constexpr bool kFnuz = std::is_same<WT, WE4m3<true>>::value;
#ifdef ANVIL_HAS_E4M3_CVT
    if constexpr (!kFnuz) {  // hardware conversion; a NaN weight makes the FMAs, and so y, NaN by itself
      anvil_e4m3x4_to_f32(r[q], f);
      return;
    }
#endif
    constexpr float kMul = kFnuz ? 0x1p119f : 0x1p120f;
    const uint32_t w = r[q];
    f[0] = bits_f32(((w & 0x7fu) << 20) | ((w & 0x80u) << 24)) * kMul;
    f[1] = bits_f32(((w & 0x7f00u) << 12) | ((w & 0x8000u) << 16)) * kMul;
    f[2] = bits_f32(((w & 0x7f0000u) << 4) | ((w & 0x800000u) << 8)) * kMul;
    f[3] = bits_f32(((w & 0x7f000000u) >> 4) | (w & 0x80000000u)) * kMul;
    if constexpr (kFnuz) {  // NaN is the byte 0x80: a zero byte of w ^ 0x80808080
      const uint32_t z = w ^ 0x80808080u;
      nan |= (z - 0x01010101u) & ~z & 0x80808080u;
    } else {  // NaN is S.1111.111: the magnitude 0x7f carries into bit 7 when 1 is added
      nan |= ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
    }
  }
}

// The NC weight rows of a warp: row c starts at w0 + c * row_bytes; rows at or past `ncols` are not read.
// (One base pointer, not NC: 6 fewer registers, which removed small spills at MB=4/8 with fp8 on sm_90.)
struct Rows {
  const uint8_t* w0;
  int64_t row_bytes;
  int ncols;
};

// Step s of this warp: U packs of each of its NC rows. Pack u of a lane starts at k = kb + s*STEP + (u*kWarp +
// lane)*E; packs at or past ke (and rows past N) read as zero.
template <class WT, int U, int NC, bool VEC>
__device__ __forceinline__ void load_step(const Rows& w, int kb, int ke, int s, int lane, uint32_t (&r)[U][NC][4]) {
  constexpr int E = 16 / WT::kBytes, STEP = kWarp * E * U;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int k = kb + s * STEP + (u * kWarp + lane) * E;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      if (c < w.ncols && k < ke) {
        load_pack<VEC>(w.w0 + c * w.row_bytes + int64_t(k) * WT::kBytes, (ke - k) * WT::kBytes, r[u][c]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; i++) r[u][c][i] = 0;
      }
    }
  }
}

// Where quad q (k = 4q .. 4q+3 of the chunk) of row m is staged. Swizzled: quad q of pack p (k = p*E + 4q .. +3)
// sits at float index (p / kWarp)*SEG + (q*kWarp + p % kWarp)*4, so a warp's float4 reads of one quad are
// consecutive (conflict-free).
template <int E>
__device__ __forceinline__ float4* staged_quad(float* xs, int m, int k, int kc) {
  constexpr int SEG = kWarp * E;
  const int seg = k / SEG, lane = (k % SEG) / E, q = (k % E) / 4;
  return reinterpret_cast<float4*>(xs + m * kc + seg * SEG + (q * kWarp + lane) * 4);
}

// Four consecutive x-side values from p as f32, the ones at or past `avail` zero: one 8-byte (16-bit types) or
// 16-byte (f32) load when VEC4 (every x-side pointer aligned, K % 4 == 0), else element by element.
template <class TX>
__device__ __forceinline__ void load_quad(const TX* p, int avail, bool vec4, float (&v)[4]) {
  if (vec4 && avail >= 4) {
    if constexpr (sizeof(TX) == 4) {
      const float4 t = *reinterpret_cast<const float4*>(p);
      v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
      const uint2 t = *reinterpret_cast<const uint2*>(p);
      const TX e[4] = {TX{uint16_t(t.x)}, TX{uint16_t(t.x >> 16)}, TX{uint16_t(t.y)}, TX{uint16_t(t.y >> 16)}};
#pragma unroll
      for (int i = 0; i < 4; i++) v[i] = to_f32(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) v[i] = i < avail ? to_f32(p[i]) : 0.f;
  }
}
template <class TX>
__device__ __forceinline__ void store_quad(TX* p, int avail, bool vec4, const TX (&h)[4]) {
  if (vec4 && avail >= 4) {
    if constexpr (sizeof(TX) == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(h[0], h[1], h[2], h[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(uint32_t(h[0].bits) | (uint32_t(h[1].bits) << 16),
                                                uint32_t(h[2].bits) | (uint32_t(h[3].bits) << 16));
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++)
      if (i < avail) p[i] = h[i];
  }
}

// A chunk is staged in batches of batch<MB> quads per thread whose loads are all issued before any is used: at one
// row and K = 4096 (1024 quads, 256 threads) that is the whole chunk in one L2 round trip. Staging follows the
// wait on the previous kernel, so its latency is paid by every block on the critical path (~1 us per round trip).
// From 4 rows up, 2: with 4 the norm's 48 staged floats pushed MB=4 past its 128 registers (a 24-byte stack).
template <int MB>
constexpr int batch() { return MB == 1 ? 4 : 2; }

// The plain and SwiGLU stagings: x rows [0, MB) x k in [k0, k0 + len) -> xs (MB, kc) f32, zero past row M and
// past len (to the end of the last segment of kWarp packs, as far as the compute loop reads).
template <int E, int MB, bool GLU, class TX>
__device__ __forceinline__ void stage_x(const Params& p, int k0, int len, float* xs) {
  constexpr int SEG = kWarp * E;
  const int nq = (len + SEG - 1) / SEG * SEG / 4;  // quads per row
  const TX* x = static_cast<const TX*>(p.x);
  const int64_t ld = GLU ? 2 * int64_t(p.K) : p.K;  // gu rows hold gate then up
  for (int i0 = int(threadIdx.x); i0 < MB * nq; i0 += batch<MB>() * kThreads) {
    float g[batch<MB>()][4], u[batch<MB>()][4];
#pragma unroll
    for (int j = 0; j < batch<MB>(); j++) {
      const int i = i0 + j * kThreads, m = i / nq, k = (i - m * nq) * 4;
      const int avail = i < MB * nq && m < p.M ? len - k : 0;
      const TX* r = x + int64_t(m) * ld + k0 + k;
      load_quad(r, avail, p.vec4, g[j]);
      if constexpr (GLU) load_quad(r + p.K, avail, p.vec4, u[j]);
    }
#pragma unroll
    for (int j = 0; j < batch<MB>(); j++) {
      const int i = i0 + j * kThreads, m = i / nq, k = (i - m * nq) * 4;
      if (i < MB * nq) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = GLU ? swiglu_f32<TX>(g[j][e], u[j][e]) : g[j][e];
        *staged_quad<E>(xs, m, k, p.kc) = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  }
}

// The norm staging: h = a (+ nb, rounded to TX as add_rms_norm stores it), x = h * gamma; the 1/rms factor is
// applied to the output instead (y = rstd * (h*gamma) @ w^T), so the block needs the sum of squares only at the
// end, and it needs the whole row: the launch never splits K for this prologue. Rows outer, so a thread's share
// of a row is one scalar; ss_part[warp][m] accumulates the warp's share over the chunks (fixed order: the result
// does not depend on timing).
template <int E, int MB, class TX>
__device__ __forceinline__ void stage_norm(const Params& p, int k0, int len, float* xs, float* ss_part, bool write_h) {
  constexpr int SEG = kWarp * E;
  const int nq = (len + SEG - 1) / SEG * SEG / 4;
  const TX* a = static_cast<const TX*>(p.x);
  const TX* b = static_cast<const TX*>(p.nb);
  const TX* gam = static_cast<const TX*>(p.gamma);
  TX* h_out = static_cast<TX*>(p.h_out);
  for (int m = 0; m < MB; m++) {
    float ss = 0.f;
    for (int i0 = int(threadIdx.x); i0 < nq; i0 += batch<MB>() * kThreads) {
      float av[batch<MB>()][4], bv[batch<MB>()][4], gv[batch<MB>()][4];
#pragma unroll
      for (int j = 0; j < batch<MB>(); j++) {
        const int i = i0 + j * kThreads, k = i * 4;
        const int avail = i < nq && m < p.M ? len - k : 0;
        const int64_t o = int64_t(m) * p.K + k0 + k;
        load_quad(a + o, avail, p.vec4, av[j]);
        if (b) load_quad(b + o, avail, p.vec4, bv[j]);
        load_quad(gam + k0 + k, avail, p.vec4, gv[j]);
      }
#pragma unroll
      for (int j = 0; j < batch<MB>(); j++) {
        const int i = i0 + j * kThreads, k = i * 4;
        if (i >= nq) continue;  // not break: a loop with a break is not unrolled (clang warned)
        const int avail = m < p.M ? len - k : 0;
        float v[4];
        TX hr[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float h = av[j][e];
          if (b) {
            hr[e] = from_f32<TX>(h + bv[j][e]);
            h = to_f32(hr[e]);
          }
          h = e < avail ? h : 0.f;
          ss = fmaf(h, h, ss);
          v[e] = h * gv[j][e];
        }
        if (b && write_h && avail > 0) store_quad(h_out + int64_t(m) * p.K + k0 + k, avail, p.vec4, hr);
        *staged_quad<E>(xs, m, k, p.kc) = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
    if (m < p.M) {
      ss = gpu::warp_sum(ss);
      if (threadIdx.x % kWarp == 0) ss_part[(threadIdx.x / kWarp) * MB + m] += ss;
    }
  }
}

// One staged chunk of x, whatever the prologue and x dtype.
template <int E, int MB>
__device__ __forceinline__ void stage_chunk(const Params& p, int k0, int len, float* xs, float* ss_part) {
  if (p.pro == kProNorm) {
    const bool write_h = p.nb && blockIdx.x == 0;
    if (p.x_dtype == DType::f32) stage_norm<E, MB, float>(p, k0, len, xs, ss_part, write_h);
    else if (p.x_dtype == DType::bf16) stage_norm<E, MB, bf16>(p, k0, len, xs, ss_part, write_h);
    else stage_norm<E, MB, f16>(p, k0, len, xs, ss_part, write_h);
  } else if (p.pro == kProSwiglu) {
    if (p.x_dtype == DType::f32) stage_x<E, MB, true, float>(p, k0, len, xs);
    else if (p.x_dtype == DType::bf16) stage_x<E, MB, true, bf16>(p, k0, len, xs);
    else stage_x<E, MB, true, f16>(p, k0, len, xs);
  } else {
    if (p.x_dtype == DType::f32) stage_x<E, MB, false, float>(p, k0, len, xs);
    else if (p.x_dtype == DType::bf16) stage_x<E, MB, false, bf16>(p, k0, len, xs);
    else stage_x<E, MB, false, f16>(p, k0, len, xs);
  }
}


// Sum V per-lane values over the warp, reduce-scatter style: at the step with lane offset O, a lane keeps the
// upper half of its H remaining values if (lane & O), else the lower half, and adds its partner's copy of that
// half. After log2(V) halving steps each lane holds V / kWarp values (or one, further summed by plain butterfly
// steps when V < kWarp): lane l ends with values (l / G) * R + i, i < R, R = max(V / kWarp, 1),
// G = max(kWarp / V, 1). Recursion, not a loop, so every index is a compile-time constant (a loop left the
// values in local memory on sm_90); halves are picked by bit masks, not `upper ? v[i] : v[i + h]`, which clang
// turns into a load through a selected address and so into scratch memory on gfx90a.
template <int O, int H, int V>
__device__ __forceinline__ void reduce_scatter(float (&v)[V], int lane) {
  if constexpr (O >= 1) {
    if constexpr (H >= 2) {
      constexpr int h = H / 2;
      const uint32_t up = 0u - uint32_t((lane & O) != 0);  // all ones on the lane that keeps the upper half
#pragma unroll
      for (int i = 0; i < h; i++) {
        const uint32_t lo = f32_bits(v[i]), hi = f32_bits(v[i + h]);
        const float send = bits_f32((lo & up) | (hi & ~up)), keep = bits_f32((hi & up) | (lo & ~up));
        v[i] = keep + ANVIL_SHFL_XOR(send, O, kWarp);
      }
      reduce_scatter<O / 2, h>(v, lane);
    } else {
      v[0] += ANVIL_SHFL_XOR(v[0], O, kWarp);
      reduce_scatter<O / 2, 1>(v, lane);
    }
  }
}

// Grid (column blocks, K splits). Rows M..MB of the accumulators see zero x and are never written.
template <class WT, int MB, bool VEC>
__global__ void ANVIL_LAUNCH_BOUNDS(kThreads, Cfg<MB>::kMinBlocks) skinny_kernel(Params p) {
  constexpr int NC = Cfg<MB>::NC, U = Cfg<MB>::U, E = 16 / WT::kBytes, Q = E / 4;
  constexpr int SEG = kWarp * E, STEP = SEG * U;
  extern __shared__ float4 xs_raw[];  // float4: 16-byte aligned
  float* xs = reinterpret_cast<float*>(xs_raw);
  float* ss_part = xs + MB * p.kc;  // norm prologue: (kWarps, MB) sums of squares of h, after the x chunk
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  if (p.pro == kProNorm && int(threadIdx.x) < kWarps * MB) ss_part[threadIdx.x] = 0.f;  // before the first barrier
  const int n0 = (int(blockIdx.x) * kWarps + warp) * NC;
  const int kb = int(blockIdx.y) * p.k_split, ke = min(p.K, kb + p.k_split);
  const int nsteps = (ke - kb + STEP - 1) / STEP, spc = p.kc / STEP;  // steps, steps per staged chunk

  const int64_t row_bytes = int64_t(p.K) * WT::kBytes;
  const Rows wrow{static_cast<const uint8_t*>(p.w) + n0 * row_bytes, row_bytes, p.N - n0};

  float acc[MB][NC];
#pragma unroll
  for (int m = 0; m < MB; m++)
#pragma unroll
    for (int c = 0; c < NC; c++) acc[m][c] = 0.f;
  uint32_t nan[NC] = {};
  uint32_t cur[U][NC][4], nxt[Cfg<MB>::DB ? U : 1][NC][4];
  load_step<WT, U, NC, VEC>(wrow, kb, ke, 0, lane, cur);
  // Launched early (gpu::launch_early): the first weights are in flight before the previous kernel, which
  // writes x or still reads y, has finished.
  anvil_wait_prior_grid();

  for (int s = 0; s < nsteps; s++) {
    if (s % spc == 0) {  // a new x chunk; this step's weights are already in flight (uniform over the block)
      const int k0 = kb + s * STEP, len = min(p.kc, ke - k0);
      __syncthreads();  // every warp is done reading the previous chunk
      stage_chunk<E, MB>(p, k0, len, xs, ss_part);
      __syncthreads();  // also orders the last ss_part update before the epilogue reads it
    }
    if constexpr (Cfg<MB>::DB) {
      if (s + 1 < nsteps) load_step<WT, U, NC, VEC>(wrow, kb, ke, s + 1, lane, nxt);
    }
    const float* xseg = xs + (s % spc) * STEP + lane * 4;
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (kb + s * STEP + (u * kWarp + lane) * E >= ke) continue;  // past K: only in a split's last step
#pragma unroll
      for (int q = 0; q < Q; q++) {
        float wf[NC][4];
#pragma unroll
        for (int c = 0; c < NC; c++) decode_quad<WT>(cur[u][c], q, wf[c], nan[c]);
#pragma unroll
        for (int m = 0; m < MB; m++) {
          const float4 xv = *reinterpret_cast<const float4*>(xseg + m * p.kc + u * SEG + q * kWarp * 4);
#pragma unroll
          for (int c = 0; c < NC; c++) {
            acc[m][c] = fmaf(xv.x, wf[c][0], acc[m][c]);
            acc[m][c] = fmaf(xv.y, wf[c][1], acc[m][c]);
            acc[m][c] = fmaf(xv.z, wf[c][2], acc[m][c]);
            acc[m][c] = fmaf(xv.w, wf[c][3], acc[m][c]);
          }
        }
      }
    }
    if constexpr (Cfg<MB>::DB) {
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
          for (int i = 0; i < 4; i++) cur[u][c][i] = nxt[u][c][i];
    } else if (s + 1 < nsteps) {
      load_step<WT, U, NC, VEC>(wrow, kb, ke, s + 1, lane, cur);
    }
  }

  constexpr int V = MB * NC, R = V >= kWarp ? V / kWarp : 1, G = V >= kWarp ? 1 : kWarp / V;
  float v[V];
#pragma unroll
  for (int m = 0; m < MB; m++)
#pragma unroll
    for (int c = 0; c < NC; c++) v[m * NC + c] = (is_fp8<WT> && nan[c]) ? bits_f32(0x7fc00000u) : acc[m][c];
  reduce_scatter<kWarp / 2, V>(v, lane);
  if (lane % G != 0) return;
#pragma unroll
  for (int i = 0; i < R; i++) {
    const int idx = (lane / G) * R + i, m = idx / NC, n = n0 + idx % NC;
    if (m >= p.M || n >= p.N) continue;
    float r = 1.f;  // norm prologue: 1/rms of row m, exactly as add_rms_norm computes it from the whole row
    if (p.pro == kProNorm) {
      float ss = 0.f;
      for (int w = 0; w < kWarps; w++) ss += ss_part[w * MB + m];
      r = rsqrtf(ss / float(p.K) + p.eps);
    }
    if (p.part) p.part[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = v[i];
    else store_y(p, int64_t(m) * p.N + n, v[i] * r * out_scale(p, n));
  }
}


template <class WT, int MB, bool VEC>
bool launch(Params p, Device dev) {
  constexpr int NC = Cfg<MB>::NC, U = Cfg<MB>::U, E = 16 / WT::kBytes, STEP = kWarp * E * U;
  // One chunk of at least one step: at most 64 KB (MB=16 fp8 on 64-wide AMD wavefronts, within the LDS);
  // with 32-wide warps every configuration stays within NVIDIA's 48 KB default.
  constexpr int kLimitBytes = kWarp > 32 ? 65536 : 49152;
  static_assert(MB * STEP * 4 <= kLimitBytes, "x chunk exceeds shared memory");
  // The norm's sums (kWarps x MB floats) come on top: that one case (fp8, 16 rows, 64-wide) does not fit.
  if (p.pro == kProNorm && (MB * STEP + kWarps * MB) * 4 > kLimitBytes) return false;
  const int cus = gpu::device_info(gpu::current_device()).compute_units;
  const int gx = gpu::ceil_div(p.N, kWarps * NC);
  // Split K when the column blocks alone cannot keep kInFlightPerCU bytes of weight loads in flight per SM (the
  // bandwidth-latency product, ~4.2 TB/s x ~0.6 us / 132 SMs ~ 20 KB); at least 2 steps per split.
  // Pending measurement: the constant and whether idle SMs, rather than bytes in flight, should decide.
  constexpr int64_t kInFlightPerCU = 24 << 10;
  constexpr int64_t kWarpBytes = (Cfg<MB>::DB ? 2 : 1) * U * NC * 16 * kWarp;
  const int64_t in_flight = int64_t(gx) * kWarps * kWarpBytes;
  int S = int(std::min<int64_t>((kInFlightPerCU * cus + in_flight - 1) / in_flight, std::max(1, p.K / (2 * STEP))));
  S = std::max(S, 1);
  if (p.pro == kProNorm) S = 1;  // the norm needs whole rows in every block (stage_norm)
  p.k_split = std::max(STEP, gpu::ceil_div(gpu::ceil_div(p.K, S), STEP) * STEP);
  S = std::max(1, gpu::ceil_div(p.K, p.k_split));
  const int reserve = p.pro == kProNorm ? kWarps * MB : 0;  // ss_part after the x chunk
  p.kc = std::min(std::max(STEP, (kSmemFloats - reserve) / MB / STEP * STEP), p.k_split);
  const size_t smem = (size_t(MB) * size_t(p.kc) + size_t(reserve)) * sizeof(float);
  Tensor part;
  if (S > 1) {
    part = Tensor::empty({S, p.M, p.N}, DType::f32, dev);
    p.part = part.data<float>();
  }
  gpu::launch_early(skinny_kernel<WT, MB, VEC>, dim3(unsigned(gx), unsigned(S)), dim3(kThreads), smem, p);
  if (S > 1) {
    const int blocks = std::min(gpu::ceil_div(int64_t(p.M) * p.N, kThreads), 4 * cus);
    splitk_reduce_kernel<<<blocks, kThreads, 0, gpu::stream()>>>(p, S);
    ANVIL_LAUNCH_CHECK();
  }
  return true;
}

// Rows rounded up to the next instantiated MB; the unaligned (byte-load) path exists only at MB = 16.
template <class WT>
bool launch_rows(const Params& p, bool vec, Device dev) {
  if (!vec) return launch<WT, 16, false>(p, dev);
  if (p.M <= 1) return launch<WT, 1, true>(p, dev);
  if (p.M <= 4) return launch<WT, 4, true>(p, dev);
  if (p.M <= 8) return launch<WT, 8, true>(p, dev);
  return launch<WT, 16, true>(p, dev);
}


bool aligned_to(const void* p, int bytes) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0; }

const void* at(const void* base, int64_t bytes) { return base ? static_cast<const char*>(base) + bytes : nullptr; }
void* at(void* base, int64_t bytes) { return base ? static_cast<char*>(base) + bytes : nullptr; }

// One pass over w for p.M <= kSkinnyMaxRows rows, or more where the ring takes them. False when the configuration
// does not fit the shared memory (launch); nothing ran then.
bool run_pass(const Params& p, DType wd, bool vec, Device dev) {
  if (try_ring(p, wd)) return true;
  if (try_mma(p, wd, vec, dev)) return true;
  switch (wd) {
    case DType::bf16: return launch_rows<WBf16>(p, vec, dev);
    case DType::f16: return launch_rows<WF16>(p, vec, dev);
    case DType::e4m3fn: return launch_rows<WE4m3<false>>(p, vec, dev);
    case DType::e4m3fnuz: return launch_rows<WE4m3<true>>(p, vec, dev);
    default: ANVIL_THROW("skinny_gemm_gpu", "w in bf16/f16/e4m3fn/e4m3fnuz", dtype_name(wd));
  }
}

// False when the configuration does not fit the shared memory (launch); nothing ran then, or, past
// kSkinnyMaxRows rows, possibly the first slices (they are recomputed by the caller's fallback: no harm).
bool run(Params p, const Tensor& w, const Tensor& x_scale, const Tensor& w_scale, float alpha, Tensor& y) {
  p.N = int(w.size(0));
  if (p.M == 0 || p.N == 0) return true;
  ANVIL_CHECK(p.M <= kSkinnyWideRows, "skinny_gemm_gpu", str("M <= ", kSkinnyWideRows), p.M);
  const int xa = dtype_size(p.x_dtype) * 4;  // a quad of x-side values
  p.vec4 = p.K % 4 == 0 && aligned_to(p.x, xa) && aligned_to(p.nb, xa) && aligned_to(p.gamma, xa) &&
           aligned_to(p.h_out, xa);
  p.w = w.data_ptr();
  p.y = y.data_ptr(), p.y_dtype = y.dtype();
  p.x_scale = x_scale.defined() ? x_scale.data<float>() : nullptr;
  p.w_scale = w_scale.defined() ? w_scale.data<float>() : nullptr;
  p.w_scale_stride = w_scale.defined() && w_scale.numel() == p.N && p.N > 1 ? 1 : 0;
  p.alpha = alpha;
  const bool vec = gpu::aligned16(p.w) && (int64_t(p.K) * int64_t(dtype_size(w.dtype()))) % 16 == 0;
  if (p.M <= kSkinnyMaxRows) return run_pass(p, w.dtype(), vec, y.device());
  if (try_ring(p, w.dtype())) return true;
  // More rows than one pass of these kernels takes: slices of kSkinnyMaxRows rows, each reading w again.
  const int64_t xrow = int64_t(p.K) * (p.pro == kProSwiglu ? 2 : 1) * dtype_size(p.x_dtype);  // gu: gate, up
  const int64_t hrow = int64_t(p.K) * dtype_size(p.x_dtype), yrow = int64_t(p.N) * dtype_size(p.y_dtype);
  for (int m0 = 0; m0 < p.M; m0 += int(kSkinnyMaxRows)) {
    Params q = p;
    q.M = std::min(int(kSkinnyMaxRows), p.M - m0);
    q.x = at(p.x, m0 * xrow), q.nb = at(p.nb, m0 * hrow), q.h_out = at(p.h_out, m0 * hrow);
    q.y = at(p.y, m0 * yrow);
    if (!run_pass(q, w.dtype(), vec, y.device())) return false;
  }
  return true;
}

}  // namespace


void skinny_gemm_gpu(const Tensor& x, const Tensor& x_scale, const Tensor& w, const Tensor& w_scale, float alpha,
                     Tensor& y, const Tensor& w_tiles) {
  Params p{};
  p.M = int(x.size(0)), p.K = int(x.size(1));
  p.x = x.data_ptr(), p.x_dtype = x.dtype();
  if (w_tiles.defined()) {
    const int64_t want = ring_tiles_bytes(w);
    ANVIL_CHECK(want == w_tiles.numel(), "skinny_gemm",
                want ? str("w_tiles of ", want, " bytes (skinny_gemm_tiles(w) on this GPU)")
                     : std::string("no w_tiles: no kernel reads them for this w on this GPU"),
                str(w_tiles.numel(), " bytes"));
    p.w_tiles = w_tiles.data<uint8_t>();
  }
  p.pro = kProPlain;
  run(p, w, x_scale, w_scale, alpha, y);  // the plain staging always fits
}

Tensor skinny_gemm_tiles_gpu(const Tensor& w) { return skinny::ring_tiles(w); }
int64_t skinny_gemm_tiles_bytes_gpu(const Tensor& w) { return skinny::ring_tiles_bytes(w); }

bool skinny_gemm_fused_stages_gpu(int64_t rows, const Tensor& w, DType x_dtype) {
  return skinny::skinny_fused_stages(int(rows), int(w.size(0)), int(w.size(1)), w.dtype(), x_dtype);
}
bool skinny_gemm_wide_gpu(int64_t rows, const Tensor& w, DType x_dtype) {
  return skinny::ring_wide(int(rows), int(w.size(0)), int(w.size(1)), w.dtype(), x_dtype);
}

void skinny_gemm_fused_gpu(const SkinnyPrologue& pro, const Tensor& w, const Tensor& w_scale, Tensor& y) {
  Params p{};
  p.M = int(y.size(0)), p.K = int(w.size(1));
  if (pro.kind == SkinnyPrologue::Kind::swiglu) {
    p.pro = kProSwiglu;
    p.x = pro.gu.data_ptr(), p.x_dtype = pro.gu.dtype();
  } else {
    p.pro = kProNorm;
    p.x = pro.a.data_ptr(), p.x_dtype = pro.a.dtype();
    p.nb = pro.b.defined() ? pro.b.data_ptr() : nullptr;
    p.gamma = pro.gamma.data_ptr();
    p.h_out = pro.b.defined() ? pro.h_out.data_ptr() : nullptr;
    p.eps = pro.eps;
  }
  if (run(p, w, Tensor(), w_scale, 1.f, y)) return;
  // The norm's sums did not fit next to the x chunk (fp8 weights, more than 8 rows, 64-wide wavefronts): the
  // norm runs as its own kernel into a temporary of a's dtype, then the plain product.
  Tensor x = Tensor::empty(pro.a.shape(), pro.a.dtype(), pro.a.device());
  Tensor rstd = Tensor::empty({pro.a.size(0)}, DType::f32, pro.a.device());
  Tensor h_out = pro.h_out;
  if (pro.b.defined()) add_rms_norm_fwd(pro.b, pro.a, pro.gamma, pro.eps, h_out, x, rstd);
  else rms_norm_fwd(pro.a, pro.gamma, pro.eps, x, rstd);
  skinny_gemm_gpu(x, Tensor(), w, w_scale, 1.f, y);
}

}  // namespace anvil
