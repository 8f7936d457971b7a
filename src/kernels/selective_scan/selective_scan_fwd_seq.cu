// GPU selective-scan forward, "sequential" variant: one thread per (channel, S states) walks the whole
// sequence in time; no scan across lanes, no second pass. docs/mamba_kernels.md has the counts behind it.
//
// Why: the warp-per-channel scan spends ~12.8 issue slots per (step, state) — a fold, a replay, the shuffle scan,
// and a bf16->f32 unpack of Bm and Cm in every channel. Here a (step, state) costs the recurrence itself:
// FMUL dt*A, EX2, FMUL B*(dt u), FFMA h, FFMA y (5 slots) plus ~1.4 of shared loads and the y reduction.
// Its floor is the MUFU unit (671 M exponentials at 16/clk/SM = 161 µs at the target shape), but it does not run
// there: MUFU is ~65% busy. Before PIPE (below) its warps waited on MUFU results, and taking 10% of its ops away
// moved the kernel by 0.6% (fourteenth round); with the results computed a group ahead, 12.5% of the state
// exponentials on the FMA pipe took 2.1% off (sixteenth round). It spends ~248 µs of recurrence with its loads
// and barriers plus ~76 µs of the staging and output phases (fourteenth round, before PIPE).
// POLY of every 4*S exponentials (4 steps x S states) run as a polynomial on the FMA pipe (variants 2-6).
//
// Block: 32 channels of one (batch, group), Q lanes per channel, each lane S = 16/Q states (N <= 16; states past
// N are padded with A = B = C = 0, which keeps h = 0). The Q lanes of a channel are adjacent (variants 1-4: they
// add their partial y with a recursive-halving shuffle per step) or in Q different warps (SPLIT, variants 5-7 and
// the default: each warp reads one Bm/Cm float4 per step as a broadcast, and the partial y meet in shared memory
// at the tile's output). Time goes in tiles of kTT steps: the block stages the tile's Bm/Cm (f32, [t][B|C][n])
// and its channels' (dt, dt*u) in shared memory once — bf16 unpacked, softplus evaluated, once per block instead
// of once per lane — while the next tile's global loads are in flight (in registers, or for variant 5 by cp.async
// into shared memory); the tile's output is gated
// (z), skipped (D u) and stored as 16-byte packs by the threads that loaded u and z.
#include <cstdlib>
#include <initializer_list>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/selective_scan/scan_gpu.h"
#include "kernels/selective_scan/scan_seq.cuh"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {
using namespace scan_seq;

constexpr int kW = gpu::kWarpSize;
constexpr int kTT = 32;   // steps per staged tile: 64 B of a bf16 row, 2 sectors
constexpr int kNP = 16;   // states held per channel (N <= 16)
constexpr int kCB = 32;   // channels per block
constexpr int kU = 4;     // steps per inner iteration (one float4 of Bm per lane and step)
// 640 threads per SM resident (<= 102 registers): B*D = 20480 channels at the target shape are 640 blocks of 32,
// so 5 blocks per SM hold all of them in one wave; at 4 (126 registers, unbounded) 112 blocks ran as a second wave.
constexpr int kMinThreadsPerSM = 640;
constexpr float kLog2e = 1.4426950408889634f;
// A channel's row of dt, of dt*u and of y: +4 floats put 8 channels on 8 bank quads, so the compute loop's
// float4 reads (a warp = 32 channels at one step) and the staging's float4 stores (a quarter warp = 2 channels x
// 4 packs of 8 steps at bf16, or 1 channel x 8 packs of 4 at f32) are conflict-free. dt and dt*u interleaved in
// one row (the earlier layout) put lanes of packs 0 and 2 on the same bank quad: 2-way conflicts on every staging
// store, which with u and z sharing a row (below) were most of the kernel's 6.6 M conflicts (ncu, H200).
constexpr int kRowStride = kTT + 4;
static_assert(kSelectiveScanTileEvery == kTT && kNP == kSelectiveScanTileMaxN,
              "a saved state per tile (N <= 16)");

struct SeqParams {
  const void *u, *delta, *Bm, *Cm, *z;
  void* out;
  const float *A, *D_skip, *delta_bias;
  float* states;  // (B, D, nstates, N): the state after every tile
  int64_t L;
  int D, N, G, per_group, blocks_per_group, nstates;
  bool softplus;
  bool states16;  // N == 16 and states on 16 bytes: a thread's 4 states are one float4 store
};

// 2^x on the FMA pipe (FlashAttention-4's trick): round-to-nearest split x = j + f with the 1.5*2^23 shifter,
// 2^f on [-0.5, 0.5] by a degree-5 polynomial (relative-error fit with the constant fixed at 1, so 2^0 is exactly
// 1 and padded steps stay the identity; max error 9e-8 in exact arithmetic, like MUFU.EX2's 2^-22), then j added
// to the exponent bits. The clamp keeps the exponent field in range; below 2^-125 the result is ~1e-38, not 0.
__device__ __forceinline__ float exp2_poly(float x) {
  x = fminf(fmaxf(x, -125.f), 125.f);
  const float r = x + 12582912.f;  // 1.5 * 2^23: the integer nearest x lands in the low mantissa bits of r
  const float f = x - (r - 12582912.f);
  float p = 1.326472731e-03f;
  p = fmaf(p, f, 9.671512991e-03f);
  p = fmaf(p, f, 5.550733581e-02f);
  p = fmaf(p, f, 2.402224243e-01f);
  p = fmaf(p, f, 6.931470037e-01f);
  p = fmaf(p, f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(r) << 23));
}

// Recursive halving over the O..1 lane bits: v holds CNT partial sums of consecutive steps; afterwards it holds
// CNT/(2O) finished sums, of the steps from `off` on. Lanes that keep the upper half send the lower one.
template <int O, int CNT>
__device__ __forceinline__ void fold_lanes(float* v, int lane, int& off) {
  if constexpr (O >= 1) {
    constexpr int H = CNT / 2;
    const bool up = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < H; i++) {
      const float send = up ? v[i] : v[i + H], keep = up ? v[i + H] : v[i];
      v[i] = keep + ANVIL_SHFL_XOR(send, O, kW);
    }
    off += up ? H : 0;
    fold_lanes<O / 2, H>(v, lane, off);
  }
}

// SPLIT (variant 5): the Q lanes of a channel sit in Q different warps (lane = channel, warp = state group), so
// every lane of a warp reads the same Bm/Cm float4 per step — a broadcast, 2.7 clocks of the shared-memory pipe
// per LDS.128 against 4.2 when a warp reads 4 distinct float4 (bench/smem_probe.cu on the H200) — and the y
// partials of the Q groups meet in shared memory at the tile's output instead of in a shuffle tree per step.
// Blocks per SM the register budget must allow: 5 of 128 threads (<= 102 registers, the 640 above). Blocks of 64
// (Q = 2: 8 states per lane) hold twice the state per lane; at 10 of them (102 registers) variant 7 spilled
// 168-216 B and took 823 µs, so they get 6 (<= 168 registers; 156 used, no spill), still more than the 4.85
// blocks per SM of the target shape. Measured with that budget: 370 µs against variant 5's 341 (thirteenth round).
constexpr int seq_min_blocks(int threads) { return threads == 128 ? kMinThreadsPerSM / 128 : 6; }

// ASYNC (variant 5; it takes 16-bit I/O with 16-byte rows on a backend whose shared-memory copy is asynchronous):
// the next tile travels global -> shared by cp.async into slots of each thread's own, which the same thread reads
// back at the staging (so no barrier), instead of in 16 registers held through the recurrence. UNR: 4-step
// iterations of the recurrence unrolled together. With both, variant 5 went 329.1 -> 325.6 us at the target shape
// on the H200 (ASYNC alone 327.6; bf16 90-92 registers instead of 94; docs/mamba_kernels.md, fifteenth round).
// PIPE (variant 5): each 4-step group's 16 exponentials are computed during the group before, so they wait in
// registers instead of the FFMA chain waiting on MUFU results; with the tile's 8 groups unrolled (UNR = 8) 326.4
// -> 322.0 us at the target shape on the H200 (2 groups per iteration: 354 us, 1: 385; the tile unrolled without
// PIPE: EX2 results used 9.6 instructions after issue on average against 18.3 with it), and with 2 of each
// group's 16 as polynomials (POLY = 2) 314.7 us (1: 318.6, 3: 323.0, 4: 335.6; sixteenth round).
template <class T, bool VEC, int Q, int POLY, bool SPLIT, bool ASYNC = false, int UNR = 1, bool PIPE = false>
__global__ void ANVIL_LAUNCH_BOUNDS(kCB * Q, seq_min_blocks(kCB * Q)) scan_fwd_seq_kernel(SeqParams p) {
  constexpr int S = kNP / Q;                   // states per lane
  constexpr int YQ = SPLIT ? Q : 1;            // partial y rows per channel in shared memory
  constexpr int kThreads = kCB * Q;            // 128 (Q = 4) or 64 (Q = 2)
  constexpr int P = gpu::Pack<T>::N;           // elements per 16-byte pack
  constexpr int PPC = kTT / P;                 // packs per channel row and tile
  constexpr int KC = kCB * PPC / kThreads;     // channel packs per thread and tensor
  constexpr int NBC = 2 * kNP * PPC;           // Bm and Cm packs per tile
  constexpr int KB = (NBC + kThreads - 1) / kThreads;
  // Bm/Cm pack m of a tile: state m % 16, Bm or Cm by bit 4, step pack m / 32. Each 2 * kNP = 32 consecutive
  // threads (a warp, or half a 64-wide wavefront) then stage one step pack of all 16 states of both: for each
  // step, 32 different banks of one BC row (conflict-free);
  // packs along time per lane (the earlier map) put 4 lanes on each bank, 5.2-way store conflicts by ncu.
  auto bc_state = [](int m) { return m % kNP; };
  auto bc_is_c = [](int m) { return (m / kNP) % 2; };
  auto bc_pack = [](int m) { return m / (2 * kNP); };
  static_assert(kCB * PPC % kThreads == 0 && S % 4 == 0 && kU % Q == 0 && kThreads % kW == 0, "tile shape");
  static_assert(P % 4 == 0, "dt and dt*u are staged a float4 at a time");
  constexpr bool kAsync = ASYNC && VEC && sizeof(T) == 2 && ANVIL_ASYNC_SMEM_COPY;
  constexpr int kRaw = kAsync ? 3 * KC + KB : 1;  // raw 16-byte packs per thread: u, delta, z, then Bm/Cm

  struct alignas(16) Smem {  // every row starts on 16 bytes: float4 / 16-byte pack accesses
    float BC[kTT][2][kNP];     // Bm, Cm of step t side by side: a 32-float row, see the staging map
    float dt[kCB][kRowStride];   // dt per step
    float dtu[kCB][kRowStride];  // dt * u per step
    float y[YQ][kCB][kRowStride];  // y (state part) of the tile: finished, or SPLIT's per-group partials
    T u[kCB][kTT];  // the tile's u and z as loaded, for its output; a channel's 16-bit row is 64 B, so a
    T z[kCB][kTT];  // quarter warp's 2 channels x 4 packs cover the 32 banks once
  };
  __shared__ Smem sm;
  // ASYNC: the next tile as loaded, thread-major (consecutive 16-byte slots); 16 unused bytes otherwise.
  __shared__ uint4 raw[kRaw][kAsync ? kThreads : 1];
  static_assert(!kAsync || seq_min_blocks(kThreads) * (sizeof(Smem) + sizeof(raw) + 1024) <= 228 * 1024,
                "the blocks per SM the register budget allows must fit the 228 KB of shared memory too");
  auto& sBC = sm.BC;
  auto& sDt = sm.dt;
  auto& sDtu = sm.dtu;
  auto& sY = sm.y;
  auto& sU = sm.u;
  auto& sZ = sm.z;

  const int tid = int(threadIdx.x), lane = tid % kW;
  const ScanBlock sb = scan_block(int(blockIdx.x), p.blocks_per_group, p.G, p.N, p.L, kCB);
  const int g = sb.g, b = sb.b, ch0 = sb.ch0;
  const int64_t L = p.L;
  const T* Bg = static_cast<const T*>(p.Bm) + sb.bc;
  const T* Cg = static_cast<const T*>(p.Cm) + sb.bc;
  const T* U = static_cast<const T*>(p.u);
  const T* Dl = static_cast<const T*>(p.delta);
  const T* Z = static_cast<const T*>(p.z);
  T* O = static_cast<T*>(p.out);

  // Compute role: channel cc of the block, states q*S .. q*S+S-1.
  const int q = SPLIT ? tid / kCB : lane % Q, cc = SPLIT ? tid % kCB : tid / Q;
  const bool valid = ch0 + cc < p.per_group;
  const int d = g * p.per_group + (valid ? ch0 + cc : 0);
  const int64_t row = int64_t(b) * p.D + d;
  float A2[S], h[S];
#pragma unroll
  for (int j = 0; j < S; j++) {
    const int n = q * S + j;
    A2[j] = n < p.N ? p.A[int64_t(d) * p.N + n] * kLog2e : 0.f;  // exp(dt A) = exp2(dt A log2 e)
    h[j] = 0.f;
  }

  // Staging role: channel packs k = tid + i*kThreads -> channel k / PPC, pack k % PPC of the tile.
  int64_t srow[KC];
  bool sval[KC];
  float sbias[KC], sskip[KC];
#pragma unroll
  for (int i = 0; i < KC; i++) {
    const int sc = (tid + i * kThreads) / PPC;
    sval[i] = ch0 + sc < p.per_group;
    const int sd = g * p.per_group + (sval[i] ? ch0 + sc : 0);
    srow[i] = (int64_t(b) * p.D + sd) * L;
    sbias[i] = p.delta_bias ? p.delta_bias[sd] : 0.f;
    sskip[i] = p.D_skip ? p.D_skip[sd] : 0.f;
  }
  uint4 nu[KC], nd[KC], nz[KC], nbc[KB];  // the next tile in flight, raw (gpu::unpack says why)
  // VEC: every load is unconditional, from a clamped address (a row of the group's channel 0 for channels past
  // the group, the last pack for packs past L, state N-1 for padded states, u for an absent z); what must be
  // zero is zeroed when staged. A guarded load (`valid ? load : 0`) let ptxas fold the bf16 unpacking into the
  // load's branch, right behind the load: a full memory latency per load, 34% of the stall samples (ncu,
  // variant 5 on the H200) in a kernel that prefetches a whole tile ahead.
  const T* Zs = Z ? Z : U;
  auto prefetch = [&](int k) {
    const int64_t tt = int64_t(k) * kTT;
#pragma unroll
    for (int i = 0; i < KC; i++) {
      const int64_t t0 = tt + ((tid + i * kThreads) % PPC) * P;
      if constexpr (VEC) {
        const int64_t tc = t0 < L ? t0 : L - P;
        if constexpr (kAsync) {
          anvil_cp_async16(&raw[i][tid], U + srow[i] + tc, true);
          anvil_cp_async16(&raw[KC + i][tid], Dl + srow[i] + tc, true);
          anvil_cp_async16(&raw[2 * KC + i][tid], Zs + srow[i] + tc, true);
        } else {
          nu[i] = *reinterpret_cast<const uint4*>(U + srow[i] + tc);
          nd[i] = *reinterpret_cast<const uint4*>(Dl + srow[i] + tc);
          nz[i] = *reinterpret_cast<const uint4*>(Zs + srow[i] + tc);
        }
      } else {
        nu[i] = gpu::pack_bits(sval[i] ? load_pack_at<T, VEC>(U + srow[i], t0, L) : zero_pack<T>());
        nd[i] = gpu::pack_bits(sval[i] ? load_pack_at<T, VEC>(Dl + srow[i], t0, L) : zero_pack<T>());
        nz[i] = gpu::pack_bits(Z && sval[i] ? load_pack_at<T, VEC>(Z + srow[i], t0, L) : zero_pack<T>());
      }
    }
#pragma unroll
    for (int i = 0; i < KB; i++) {
      const int m = tid + i * kThreads, n = bc_state(m);
      const int64_t t0 = tt + bc_pack(m) * P;
      const T* src = bc_is_c(m) ? Cg : Bg;
      if constexpr (VEC) {
        const int64_t tc = t0 < L ? t0 : L - P;
        if constexpr (kAsync) {
          if (m < NBC) anvil_cp_async16(&raw[3 * KC + i][tid], src + int64_t(n < p.N ? n : p.N - 1) * L + tc, true);
        } else {
          if (m < NBC) nbc[i] = *reinterpret_cast<const uint4*>(src + int64_t(n < p.N ? n : p.N - 1) * L + tc);
        }
      } else {
        const bool live = m < NBC && n < p.N;
        nbc[i] = gpu::pack_bits(live ? load_pack_at<T, VEC>(src + int64_t(n) * L, t0, L) : zero_pack<T>());
      }
    }
    if constexpr (kAsync) anvil_cp_async_commit();
  };
  auto stage = [&](int k) {
    const int64_t tt = int64_t(k) * kTT;
    if constexpr (kAsync) {  // the thread's own copies: complete and visible to it after the wait, no barrier
      anvil_cp_async_wait_all();
#pragma unroll
      for (int i = 0; i < KC; i++) nu[i] = raw[i][tid], nd[i] = raw[KC + i][tid], nz[i] = raw[2 * KC + i][tid];
#pragma unroll
      for (int i = 0; i < KB; i++)
        if (tid + i * kThreads < NBC) nbc[i] = raw[3 * KC + i][tid];
    }
#pragma unroll
    for (int i = 0; i < KC; i++) {
      const int sc = (tid + i * kThreads) / PPC, sp = (tid + i * kThreads) % PPC;
      anvil_store16(&sU[sc][sp * P], nu[i].x, nu[i].y, nu[i].z, nu[i].w);  // u and z wait for the output
      anvil_store16(&sZ[sc][sp * P], nz[i].x, nz[i].y, nz[i].z, nz[i].w);
      const gpu::Pack<T> pu = gpu::unpack<T>(nu[i]), pd = gpu::unpack<T>(nd[i]);
      float dtv[P];
#pragma unroll
      for (int e = 0; e < P; e++) {
        float v = to_f32(pd.v[e]) + sbias[i];
        if (p.softplus) v = softplus_t<T>(v);
        // Past L: dt = 0, the identity step. VEC (L a multiple of the pack): a pack is wholly inside or past L,
        // so one 64-bit compare per pack instead of one per element (the staging's SASS, bf16: 379 -> 323
        // instructions; docs/mamba_kernels.md, fourteenth round, has the time).
        dtv[e] = (VEC ? tt + sp * P < L : tt + sp * P + e < L) ? v : 0.f;
      }
#pragma unroll
      for (int e = 0; e < P; e += 4) {
        *reinterpret_cast<float4*>(&sDt[sc][sp * P + e]) = make_float4(dtv[e], dtv[e + 1], dtv[e + 2], dtv[e + 3]);
        *reinterpret_cast<float4*>(&sDtu[sc][sp * P + e]) =
            make_float4(dtv[e] * to_f32(pu.v[e]), dtv[e + 1] * to_f32(pu.v[e + 1]), dtv[e + 2] * to_f32(pu.v[e + 2]),
                        dtv[e + 3] * to_f32(pu.v[e + 3]));
      }
    }
#pragma unroll
    for (int i = 0; i < KB; i++) {
      const int m = tid + i * kThreads;
      if (m < NBC) {
        const int n = bc_state(m), sp = bc_pack(m), c = bc_is_c(m);
        const bool live = n < p.N;  // padded states: B = C = 0 keeps h = 0 and out of y
        const gpu::Pack<T> pbc = gpu::unpack<T>(nbc[i]);
#pragma unroll
        for (int e = 0; e < P; e++) sBC[sp * P + e][c][n] = live ? to_f32(pbc.v[e]) : 0.f;
      }
    }
  };
  auto store_out = [&](int k) {
    const int64_t tt = int64_t(k) * kTT;
#pragma unroll
    for (int i = 0; i < KC; i++) {
      const int sc = (tid + i * kThreads) / PPC, sp = (tid + i * kThreads) % PPC;
      float y[P];
#pragma unroll
      for (int e = 0; e < P; e += 4) {
        float4 v = *reinterpret_cast<const float4*>(&sY[0][sc][sp * P + e]);
#pragma unroll
        for (int g = 1; g < YQ; g++) {
          const float4 w = *reinterpret_cast<const float4*>(&sY[g][sc][sp * P + e]);
          v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
        }
        y[e] = v.x, y[e + 1] = v.y, y[e + 2] = v.z, y[e + 3] = v.w;
      }
      const gpu::Pack<T> cu = gpu::load_pack(&sU[sc][sp * P]), cz = gpu::load_pack(&sZ[sc][sp * P]);
      gpu::Pack<T> pk;
#pragma unroll
      for (int e = 0; e < P; e++) {
        float v = fmaf(sskip[i], to_f32(cu.v[e]), y[e]);
        if (Z) v *= silu_t<T>(to_f32(cz.v[e]));
        pk.v[e] = from_f32<T>(v);
      }
      const int64_t t0 = tt + sp * P;
      if (!sval[i] || t0 >= L) continue;
      if (VEC) {
        gpu::store_pack(O + srow[i] + t0, pk);
      } else {
#pragma unroll
        for (int e = 0; e < P; e++)
          if (t0 + e < L) O[srow[i] + t0 + e] = pk.v[e];
      }
    }
  };

  // Tile 0 is staged before the loop and tile k+1 at the end of iteration k, under `k + 1 < tiles`. The
  // straight form (barrier, output of k-1, staging of k, barrier at the top of every iteration) computes the
  // same, but ptxas then spilled 8 bytes around the tile loop (bf16, sm_90) and scheduled the recurrence worse:
  // 340.6 against 329.0 us at the target shape on the H200 (docs/mamba_kernels.md, fourteenth round).
  const int tiles = int((L + kTT - 1) / kTT);
  prefetch(0);
  stage(0);
  __syncthreads();  // tile 0 is staged
  if (tiles > 1) prefetch(1);
  for (int k = 0; k < tiles; k++) {
    const float* dtr = sDt[cc];
    const float* dtur = sDtu[cc];
    // The exponentials of a 4-step group, a[s][j] = exp2(dt_s A_j log2 e): POLY of them on the FMA pipe.
    auto group_exps = [&](float (&a)[kU][S], const float* d) {
      const float4 d4 = *reinterpret_cast<const float4*>(d);
      const float dd[kU] = {d4.x, d4.y, d4.z, d4.w};
#pragma unroll
      for (int s = 0; s < kU; s++)
#pragma unroll
        for (int j = 0; j < S; j++) {
          const float x = dd[s] * A2[j];
          a[s][j] = j * kU + s < POLY ? exp2_poly(x) : ANVIL_EXP2_FTZ(x);
        }
    };
    // PIPE: a group's exponentials are computed during the group before it (the tile's first at its top), so the
    // recurrence's FFMAs find them in registers instead of waiting on MUFU latency.
    [[maybe_unused]] float an[kU][S];
    if constexpr (PIPE) group_exps(an, dtr);
#pragma unroll UNR
    for (int t = 0; t < kTT; t += kU) {
      static_assert(kU == 4, "one float4 of dt and one of dt*u per iteration");
      float a[kU][S];
      if constexpr (PIPE) {
#pragma unroll
        for (int s = 0; s < kU; s++)
#pragma unroll
          for (int j = 0; j < S; j++) a[s][j] = an[s][j];
        if (t + kU < kTT) group_exps(an, dtr + t + kU);
      } else {
        group_exps(a, dtr + t);
      }
      float y[kU];
      const float4 u4 = *reinterpret_cast<const float4*>(dtur + t);
      const float ddu[kU] = {u4.x, u4.y, u4.z, u4.w};
#pragma unroll
      for (int s = 0; s < kU; s++) {
        float bb[S], cv[S];
#pragma unroll
        for (int j = 0; j < S; j += 4) {
          const float4 vb = *reinterpret_cast<const float4*>(&sBC[t + s][0][q * S + j]);
          const float4 vc = *reinterpret_cast<const float4*>(&sBC[t + s][1][q * S + j]);
          bb[j] = vb.x, bb[j + 1] = vb.y, bb[j + 2] = vb.z, bb[j + 3] = vb.w;
          cv[j] = vc.x, cv[j + 1] = vc.y, cv[j + 2] = vc.z, cv[j + 3] = vc.w;
        }
#pragma unroll
        for (int j = 0; j < S; j++) {
          h[j] = fmaf(a[s][j], h[j], bb[j] * ddu[s]);
          y[s] = j == 0 ? cv[j] * h[j] : fmaf(cv[j], h[j], y[s]);
        }
      }
      if constexpr (SPLIT) {
        *reinterpret_cast<float4*>(&sY[q][cc][t]) = make_float4(y[0], y[1], y[2], y[3]);
      } else {
        int off = 0;
        fold_lanes<Q / 2, kU>(y, lane, off);
#pragma unroll
        for (int i = 0; i < kU / Q; i++) sY[0][cc][t + off + i] = y[i];
      }
    }
    // The saved state after every tile (selective_scan.h: every 32 steps for N <= 16): what the backward starts
    // each tile from, and the last one what generation continues from. N = 16: one 16-byte store per thread; the
    // Q threads of a channel fill its 64-byte row.
    if (valid) {
      float* st = p.states + (row * p.nstates + k) * p.N + q * S;
      if (p.states16) {
#pragma unroll
        for (int j = 0; j < S; j += 4)
          *reinterpret_cast<float4*>(st + j) = make_float4(h[j], h[j + 1], h[j + 2], h[j + 3]);
      } else {
#pragma unroll
        for (int j = 0; j < S; j++)
          if (q * S + j < p.N) st[j] = h[j];
      }
    }
    __syncthreads();  // tile k's compute is done with the staged tile and has written sY
    store_out(k);
    if (k + 1 < tiles) {
      stage(k + 1);
      __syncthreads();  // tile k+1 is staged
      if (k + 2 < tiles) prefetch(k + 2);
    }
  }
}

template <class T, int Q, int POLY, bool SPLIT = false, bool ASYNC = false, int UNR = 1, bool PIPE = false>
void launch_seq(const SeqParams& p, int64_t batches, bool vec) {
  const unsigned grid = unsigned(batches * p.G * p.blocks_per_group);
  auto kernel = vec ? scan_fwd_seq_kernel<T, true, Q, POLY, SPLIT, ASYNC, UNR, PIPE>
                    : scan_fwd_seq_kernel<T, false, Q, POLY, SPLIT, ASYNC, UNR, PIPE>;
  kernel<<<grid, kCB * Q, 0, gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}


}  // namespace

int selective_scan_variant() {
  static const int v = [] {
    const char* e = std::getenv("ANVIL_SCAN_VARIANT");
    // 5: measured fastest on the H200 (347-349 us against 357-364 for 1, once the prefetch stayed raw; before
    // that fix 415 against 427); docs/mamba_kernels.md has every variant's numbers.
    return e && *e ? std::atoi(e) : 5;
  }();
  return v;
}

bool selective_scan_fwd_seq_gpu(int variant, const Tensor& u, const Tensor& delta, const Tensor& A,
                                const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                                const Tensor& delta_bias, bool delta_softplus, Tensor& out, Tensor& states) {
  if (variant < 1 || variant > 7 || A.size(1) > kNP) return false;
  SeqParams p;
  p.u = u.data_ptr();
  p.delta = delta.data_ptr();
  p.Bm = Bm.data_ptr();
  p.Cm = Cm.data_ptr();
  p.z = z.defined() ? z.data_ptr() : nullptr;
  p.out = out.data_ptr();
  p.A = A.data<float>();
  p.D_skip = D_skip.defined() ? D_skip.data<float>() : nullptr;
  p.delta_bias = delta_bias.defined() ? delta_bias.data<float>() : nullptr;
  p.states = states.data<float>();
  p.L = u.size(2);
  p.D = int(u.size(1));
  p.N = int(A.size(1));
  p.G = int(Bm.size(1));
  p.per_group = p.D / p.G;
  p.blocks_per_group = gpu::ceil_div(p.per_group, kCB);
  p.nstates = int(selective_scan_states(p.L, p.N));  // one per kTT-step tile (N <= kNP)
  p.softplus = delta_softplus;
  p.states16 = p.N == kNP && gpu::aligned16(states.data_ptr());
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    const bool vec = p.L % gpu::Pack<T>::N == 0 && scan_seq::all_aligned16({&u, &delta, &Bm, &Cm, &z, &out});
    const int64_t batches = u.size(0);
    switch (variant) {
      // Q lanes x 16/Q states per channel; POLY of each 4 steps x S states' exponentials on the FMA pipe.
      case 1: launch_seq<T, 4, 0>(p, batches, vec); break;  // all on MUFU
      case 2: launch_seq<T, 4, 2>(p, batches, vec); break;  // 12.5% polynomial
      case 3: launch_seq<T, 4, 4>(p, batches, vec); break;  // 25% polynomial
      case 4: launch_seq<T, 2, 4>(p, batches, vec); break;  // 2 lanes x 8 states, 12.5% polynomial
      case 5:  // 4 warps x 4 states, broadcast Bm/Cm, the next tile by cp.async where it is asynchronous (CUDA),
               // exponentials a group ahead with 12.5% of them polynomials
#if defined(ANVIL_HIP)
        // The unrolled tile with PIPE took 168 VGPRs and 56 B of scratch on gfx90a, against 106 and none with
        // 8-step iterations; it is not measured there, so HIP keeps those.
        launch_seq<T, 4, 0, true, true, 2>(p, batches, vec);
#else
        launch_seq<T, 4, 2, true, true, 8, true>(p, batches, vec);
#endif
        break;
      case 6: launch_seq<T, 4, 2, true>(p, batches, vec); break;  // 5 without cp.async and PIPE, 12.5% polynomial
      case 7: launch_seq<T, 2, 0, true>(p, batches, vec); break;  // 2 warps x 8 states, broadcast Bm/Cm
    }
  });
  return true;
}

}  // namespace anvil
