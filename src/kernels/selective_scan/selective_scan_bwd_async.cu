// GPU selective-scan backward, sequential schedule (ANVIL_SCAN_BWD_VARIANT=2 to 4, and 5 = the default, below): the
// mirror of selective_scan_fwd_seq.cu. A block is 32 channels of one (batch, group), a thread one (channel,
// 4 states), walking time backwards; no scans across lanes.
//
// The adjoint runs backwards and needs h_{t-1} at every step, which only a forward pass gives (dividing by a_t
// would amplify rounding by 1/a). The forward saved h after every 32-step tile (states, selective_scan.h), so
// tiles go from last to first, each on its own: forward over the tile's first 24 steps from the saved state of
// the tile before, keeping h every 8 steps in shared memory, then 8-step sub-tiles from last to first: recompute
// the sub-tile with a and h in registers, then the adjoint over its 8 steps. (Until the forward saved a state per
// tile, a "phase 1" re-ran each 512-step chunk forward first to find them: 15 of every 16 tiles staged and
// advanced twice, ~15% of the instructions, and a 20 MB scratch.)
// Every 4 steps the same 128 threads turn into reducers: thread (s, n, dB|dC) sums 32 channels, thread
// (channel, s) finishes du, ddelta, dz of one step.
//
// Variant 1 (removed: 2.74 ms at bf16 B=4 D=5120 N=16 L=2048, against 2.35 for the warp kernel) profiled on the
// H200 at 7.7 cycles per issued instruction, 0.43 eligible warps per scheduler, 34% of stalls on L1TEX. What this
// file changes, and which profile line it answers:
//   1. The next tile is copied global -> shared with cp.async (anvil_cp_async16) into a raw tile in the I/O
//      dtype, instead of being held in registers across the compute: variant 1 spilled those packs (116 B per
//      thread, 9.8 M local-memory requests using 1 of 32 bytes per sector). HIP: plain copies (vendor/hip.h).
//   2. The raw tile is unpacked into the f32 tiles conflict-free: a warp converts 32 consecutive steps of one
//      channel, and Bm/Cm go [n][t] -> [t][n] with consecutive [t][n] stores (variant 1 stored from its (channel,
//      pack) registers: 6.1-way bank conflicts, 44% of all shared-store wavefronts).
//   3. du, ddelta, dz of a (channel, step) go back into that step's slot of the staged tile (dead once the step's
//      reduction round has read it) and leave at the tile's end as 16-byte packs, whole sectors (variant 1: scalar
//      2-byte stores from the reducers, 9.7 of 32 bytes used per sector).
//   4. The tile's saved state is loaded before the staging barrier: its latency hides under the staging.
// The arithmetic (the adjoint per (step, state): G = C dy + q, dC <- dy h, dB <- G dt u,
// gB += G B, q = a G, w = q h_{t-1}, dtw += A w, dA += w dt; dB/dC summed over the block's 32 channels in shared
// memory, then one f32 atomic per (block, step, state)). docs/mamba_kernels.md has the counts and the prediction.
// Variant 3 (template HOLD, ANVIL_SCAN_BWD_VARIANT=3): per 4-step round only that round is recomputed (the second
// round of a sub-tile advances the first 4 steps again: 3.25 instead of 2.75 forward passes) and its a, h, B, C,
// (dt, dt u, dy) stay in registers for the adjoint, which then reads no shared memory: the b2 profile is 82% L1/TEX
// (shared pipe) and the d/B/C LDS.128 of recompute + adjoint are ~half of its wavefronts (SASS: 41 -> 31 LDS.128
// per sub-tile, 760 -> 811 instructions).
// Variant 5 (template ONEBAR on top of WRED, ANVIL_SCAN_BWD_VARIANT=5, the default): variant 4 with two sets of
// the round buffers (red_buf, pp_buf), alternating, so a round needs one barrier instead of two. ncu put 0.32 of
// variant 4's ~5.4 cycles per issued instruction on barriers, with 3 warps per scheduler (168 registers, 68 KB then).
// Variant 4 (template WRED on top of HOLD, ANVIL_SCAN_BWD_VARIANT=4): variant 3 with the dB/dC values of each step
// summed over the warp's channels by shuffles (warp_chan_sum) before they go to shared memory, so a warp stores one
// float4 per lane and round instead of two per lane and step, and a dB/dC reducer adds kWarps (4; AMD 2) values
// instead of 32. Those sums were 128 of the ~320 shared wavefronts per warp and sub-tile (16 STS.128 + 64 LDS.32);
// now 16 (2 + 8), for 56 shuffles. SASS (sm_90, bf16, 16-byte path), sub-tile loop: 811 -> 911 instructions
// (+56 SHFL, +112 FSEL, -56 LDS, -14 STS.128). docs/mamba_kernels.md has the prediction.
#include <algorithm>
#include <cstddef>
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

constexpr int kTT = 32;                     // steps per staged tile (as the forward)
constexpr int kNP = 16;                     // states per channel (N <= 16; padded with A = B = C = 0)
constexpr int kCB = 32;                     // channels per block
constexpr int kQ = 4;                       // lanes per channel
constexpr int kS = kNP / kQ;                // states per lane: one float4
constexpr int kThreads = kCB * kQ;          // 128
constexpr int kSub = 8;                     // steps per recomputed sub-tile (a, h in registers)
constexpr int kHalf = 4;                    // steps per reduction round
constexpr int kSubs = kTT / kSub;           // 4 sub-tiles per tile
constexpr int kRedS = 2 * kCB * kNP + 8;    // dC|dB of one step; +8 floats: 4 steps x 8 states on 32 banks
// (gB, dtw, y) x lane x step of one channel, no padding: a storing quarter warp (channels 2p, 2p + 1 x 4 lanes, one
// float4 each) then covers 8 bank quads (the rows 12 quads apart; with +4, as until the seventeenth round, the two
// channels' quads overlapped in one: 2-way conflicts on every store), and the reducers rotate the lanes they read.
constexpr int kPPS = 3 * kQ * kHalf;
constexpr int kWarps = kThreads / gpu::kWarpSize;  // 4 (NVIDIA) or 2 (AMD)
constexpr int kRedW = 2 * kNP * kHalf;      // variant 4: floats of one warp's pre-summed dC|dB in a round
constexpr int kChElems = kCB * kTT;         // (channel, step) elements of a tile: 1024
constexpr int kBCElems = kNP * kTT;         // (state, step) elements of one of Bm / Cm: 512
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(kTT == kSelectiveScanTileEvery && kNP == kSelectiveScanTileMaxN,
              "a saved state per tile (N <= 16)");
static_assert(kS == 4 && kQ == kHalf && kThreads == 2 * kNP * kHalf && kThreads == kCB * kHalf,
              "reducer roles cover 128");
static_assert(kChElems % kThreads == 0 && kBCElems % kThreads == 0 && kThreads % kTT == 0 && kThreads % kNP == 0,
              "conversion passes cover the tile");

struct BwdAsyncParams {
  const void *u, *delta, *Bm, *Cm, *z, *dout;
  void *du, *ddelta, *dz;
  void* y;  // the forward's output, recomputed (optional)
  RowStrides z_rows, y_rows;  // where dz's and y's rows start: (B, D, L) or (D, B, L) order
  const float *A, *D_skip, *delta_bias;
  const float* states;                     // (B, D, nstates, N): h after each tile
  float *dA, *dD, *ddelta_bias, *dB, *dC;  // dB, dC: f32 accumulators (B, G, N, L), zeroed by the host
  int64_t L;
  int D, N, G, per_group, blocks_per_group, nstates;
  bool softplus;
  bool states16;  // N == 16 and states on 16 bytes: a thread's 4 saved states are one float4 load
  // Work items (below): channel block j of `blocks` (b, g, 32 channels) times time segment s of `segs`, each
  // seg_tiles tiles long, taken in the order of `work` (zeroed by the host): every block's last segment first.
  int blocks, segs, seg_tiles;
  unsigned* work;  // [0]: items taken; [1 + j * segs + s]: segment s of block j is done and its carry stored
  float4* carry;   // (blocks, segs, kThreads): the adjoint qc entering segment s from segment s + 1
};

struct alignas(16) BwdSmem {
  float B[kTT][kNP], C[kTT][kNP];
  // (dt, dt*u, dy, u) per channel and step; after the step's reduction round, (du, ddelta, dz, -) of the step.
  // +1: the compute warps read one step of 8 channels at once, which lands on 8 distinct bank quads.
  float4 d[kCB][kTT + 1];
  // (d dt/d delta, dout * silu'(z)) per channel and step. +2: the per-step reducers' 16 lanes of a half warp (8
  // channels x 2 steps) read 16 distinct bank pairs (with +1, channel c + 1 at step s and c at s + 1 collided).
  float2 e[kCB][kTT + 2];
  // silu(z) per channel and step (1 without z), when y is wanted; read by write_tile as float4s: rows of 36 keep
  // them 16-byte aligned and put write_tile's 8 channels of a quarter warp on 8 distinct bank quads.
  float sz[kCB][kTT + 4];
  float4 sub[kSubs - 1][kThreads]; // h at steps 8, 16, 24 of the tile, per thread
  float bias[kCB];                 // delta_bias of the block's channels
  // Last: without asynchronous copies (HIP) the raw tile lives here, free between a tile's last round and the
  // next tile's first (61.8 KB in all fits the 64 KB of LDS of a CDNA workgroup; a separate raw tile would not).
  float red[kHalf][kRedS];         // [step][dC|dB][channel][state]
  float pp[kCB][kPPS];             // [channel][gB|dtw|y][lane][step]
};
// The next tile in the I/O dtype, filled by cp.async while the current one is computed. Channel rows are one
// tile long (the conversion reads 32 consecutive steps of a row: conflict-free); Bm/Cm rows get 16 bytes of
// padding (the transposing reads then hit 2 rows per bank at most instead of 8) and stay 16-byte aligned.
template <class T>
struct alignas(16) RawTile {
  static constexpr int kRowBC = kTT + 16 / int(sizeof(T));
  T ch[4][kCB][kTT];  // u, delta, z, dout
  T bc[2][kNP][kRowBC];
};
// ANVIL_ASYNC_SMEM_COPY (vendor header): 1 when the copy runs during compute and needs its own buffer.
constexpr bool kOverlap = ANVIL_ASYNC_SMEM_COPY;
template <class T>
constexpr size_t smem_bytes() { return kOverlap ? sizeof(BwdSmem) + sizeof(RawTile<T>) : sizeof(BwdSmem); }
static_assert(sizeof(BwdSmem) % 16 == 0 && offsetof(BwdSmem, red) % 16 == 0, "the raw tile is 16-byte aligned");
static_assert(sizeof(BwdSmem) - offsetof(BwdSmem, red) >= sizeof(RawTile<float>), "raw tile fits red + pp");
// sm_90: 228 KB of shared memory per SM, 1 KB of it reserved per block. Past 75 KB a block, the 16-bit kernels
// would drop to 2 blocks per SM and lose a third of their warps (the registers allow 3).
static_assert(!kOverlap || 3 * (sizeof(BwdSmem) + sizeof(RawTile<bf16>) + 1024) <= 228 * 1024,
              "3 blocks of the 16-bit backward per SM");
static_assert(kWarps * kRedW <= kHalf * kRedS, "variant 4's warp sums use the start of red");
static_assert(2 * kWarps * kRedW + kCB * kPPS <= kHalf * kRedS && (kSub / kHalf) % 2 == 0,
              "variant 5's second buffers fit in red, and a sub-tile's rounds alternate them");

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void unpack4(const float4& v, float* o) { o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w; }

// Variant 4: v[0..7] (dC of the lane's states 4q..4q+3, then dB of them) summed over the channels of a warp --
// the lanes of the same q, which differ in lane bits 2 and up -- by a butterfly reduce-scatter. Each round a lane
// keeps the half of its values named by one lane bit, sends the other half across that bit and adds what comes
// back (2 selects, 1 shuffle, 1 add per pair kept): 4 + 2 + 1 shuffles, where an all-reduce would take 3 x 8.
// Lane l, bits b4 b3 b2 of l, afterwards holds:
//   xor 16: r1[i] = v[4 b4 + i] summed over lanes {l, l^16}, i < 4
//   xor 8:  r2[i] = v[4 b4 + 2 b3 + i] over l ^ {0, 8, 16, 24}, i < 2
//   xor 4:  r = v[j], j = 4 b4 + 2 b3 + b2 = (l >> 2) & 7, over l ^ 4k, k < 8: the 8 channels of its 32 lanes
//   xor 32 (64-wide warps only): r + the same sum of the other 32 lanes; both halves then hold v[j] summed over
//           the warp's 16 channels (a + b == b + a: the two copies are equal).
// The tree's order depends on lane positions only: the same sums run to run.
__device__ __forceinline__ float warp_chan_sum(const float (&v)[8], int lane) {
  const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
  float r1[4], r2[2];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float keep = b4 ? v[i + 4] : v[i], send = b4 ? v[i] : v[i + 4];
    r1[i] = keep + ANVIL_SHFL_XOR(send, 16, gpu::kWarpSize);
  }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const float keep = b3 ? r1[i + 2] : r1[i], send = b3 ? r1[i] : r1[i + 2];
    r2[i] = keep + ANVIL_SHFL_XOR(send, 8, gpu::kWarpSize);
  }
  const float keep = b2 ? r2[1] : r2[0], send = b2 ? r2[0] : r2[1];
  float r = keep + ANVIL_SHFL_XOR(send, 4, gpu::kWarpSize);
  if constexpr (gpu::kWarpSize == 64) r += ANVIL_SHFL_XOR(r, 32, gpu::kWarpSize);
  static_assert(gpu::kWarpSize == 32 || gpu::kWarpSize == 64, "lane bits 2-4 (and 5) are the warp's channels");
  return r;
}
// Where (dC|dB rw, state n) of a warp sits in its kRedW floats: a float4 of the round's 4 steps at 4 x slot. With
// slot = 16 rw + (n ^ 2 n3) (n3 = bit 3 of n) both sides are conflict-free: a storing quarter-warp (lanes 8p ..
// 8p+7: q = 0..3, j = 2p, 2p+1, so fixed rw and n1) covers 8 bank quads, (n2, n1 ^ n3, n0) over (q, n0); and
// a reducer warp (fixed rw and n3, 8 states x 4 steps) reads 32 banks, (n2, n1 ^ n3, n0) over (n2, n1, n0).
__device__ __forceinline__ int wred_slot(int rw, int n) { return kNP * rw + (n ^ ((n >> 2) & 2)); }

// One 16-byte pack of a row at t0 into shared memory: asynchronous when VEC (a pack is then wholly inside or past
// L), element by element otherwise. ok = false (or past L) writes zeros: padded states and channels must read 0.
template <class T, bool VEC>
__device__ __forceinline__ void copy_pack(T* dst, const T* row, int64_t t0, int64_t L, bool ok) {
  constexpr int P = gpu::Pack<T>::N;
  if constexpr (VEC) {
    const bool in = ok && t0 < L;
    anvil_cp_async16(dst, in ? row + t0 : row, in);
  } else {
#pragma unroll
    for (int i = 0; i < P; i++) dst[i] = ok && t0 + i < L ? row[t0 + i] : from_f32<T>(0.f);
  }
}
template <class T, bool VEC>
__device__ __forceinline__ void store_pack_at(T* row, int64_t t0, int64_t L, const gpu::Pack<T>& pk) {
  constexpr int P = gpu::Pack<T>::N;
  if constexpr (VEC) {
    if (t0 < L) gpu::store_pack(row + t0, pk);
  } else {
#pragma unroll
    for (int i = 0; i < P; i++)
      if (t0 + i < L) row[t0 + i] = pk.v[i];
  }
}

// SEG: blocks take (channel block, segment) items by ticket (below); otherwise block i is channel block i, whole.
template <class T, bool VEC, bool HOLD, bool WRED, bool ONEBAR, bool SEG>
__global__ void ANVIL_LAUNCH_BOUNDS(kThreads, 3) scan_bwd_async_kernel(BwdAsyncParams p) {
  static_assert(HOLD || !WRED, "the warp pre-sum (variant 4) is an option of variant 3's adjoint");
  static_assert(WRED || !ONEBAR, "one barrier a round (variant 5) double-buffers variant 4's sums");
  constexpr int P = gpu::Pack<T>::N;
  constexpr int PPC = kTT / P;                  // packs per channel row and tile
  constexpr int KC = kCB * PPC / kThreads;      // channel packs per thread and tensor
  constexpr int NBC = 2 * kNP * PPC;            // Bm and Cm packs per tile
  constexpr int KB = (NBC + kThreads - 1) / kThreads;
  static_assert(kCB * PPC % kThreads == 0 && kCB % 8 == 0, "tile shape");
  extern __shared__ float4 smem_raw[];
  BwdSmem& sm = *reinterpret_cast<BwdSmem*>(smem_raw);
  RawTile<T>& raw = *reinterpret_cast<RawTile<T>*>(reinterpret_cast<char*>(smem_raw) +
                                                   (kOverlap ? sizeof(BwdSmem) : offsetof(BwdSmem, red)));

  const int tid = int(threadIdx.x);
  // Persistent blocks take (channel block, time segment) items. Why: at 3 blocks per SM (168 registers, 72.3 KB) the
  // 640 blocks of the issue's shape were 1.62 waves and the 512 of Mamba-370m/1.4B 1.29, and a second wave of one
  // or two blocks per SM runs at ~half the SM's rate of three (docs/mamba_kernels.md). Eight segments per block
  // make 10-13 rounds of items, so the last, partial round is short. A segment starts from the adjoint carry the
  // segment after it left (its items were all taken earlier: they come first in the order). Without SEG the
  // block index is the item, and one-segment launches keep that plain grid. H200, fwd + bwd at the issue's shape:
  // 1770 us plain, 1708 with 8 segments. (The float adds below are explicit reductions: as atomicAdd, nvcc made them
  // returning ATOMGs in this kernel, and every tile ran ~3% slower.)
  __shared__ int s_item;
  for (int once = 0;; once++) {
    if constexpr (SEG) {
      if (tid == 0) s_item = int(atomicAdd(p.work, 1u));
      __syncthreads();
    } else if (once) {
      break;
    }
    const int item = SEG ? s_item : int(blockIdx.x);
    if (SEG && item >= p.blocks * p.segs) break;
    const int seg = p.segs - 1 - item / p.blocks;
    const int blk = item % p.blocks;
    const ScanBlock sb = scan_block(blk, p.blocks_per_group, p.G, p.N, p.L, kCB);
    const int g = sb.g, b = sb.b, ch0 = sb.ch0;
    const int64_t L = p.L;
    const T* Bg = static_cast<const T*>(p.Bm) + sb.bc;
    const T* Cg = static_cast<const T*>(p.Cm) + sb.bc;
    const T* Z = static_cast<const T*>(p.z);
    // Channel and row of block channel sc (clamped to the group's first channel past it: never stored then).
    auto chan_of = [&](int sc) { return g * p.per_group + (ch0 + sc < p.per_group ? ch0 + sc : 0); };
    auto row_of = [&](int sc) { return int64_t(b) * p.D + chan_of(sc); };

    // Compute role (and per-step reducer role): channel cc, states q*4 .. q*4+3.
    const int q = tid % kQ, cc = tid / kQ;
    const bool valid = ch0 + cc < p.per_group;
    const int d = g * p.per_group + (valid ? ch0 + cc : 0);
    const int64_t row = int64_t(b) * p.D + d;
    // Per-step reducer role: step rq of each round of channel rc, 8 channels of one step per 8 adjacent threads, so
    // that a quarter warp's float4 of sm.d lands on 8 distinct bank quads (thread (cc, q) put channels c + 1 at step
    // s and c at s + 1 on the same quad: 2-way conflicts on every load and store of the step outputs).
    constexpr int kRC = 8;  // channels per group of reducers: 8 float4 = the 8 bank quads a quarter warp reaches
    const int rc = (tid / (kRC * kHalf)) * kRC + tid % kRC, rq = (tid / kRC) % kHalf;
    static_assert(kThreads == kHalf * kCB && kCB % kRC == 0, "reducer roles cover the block's channels x 4 steps");
    const bool rvalid = ch0 + rc < p.per_group;
    const int rd = g * p.per_group + (rvalid ? ch0 + rc : 0);
    const float dskip = p.D_skip ? p.D_skip[rd] : 0.f;
    float A2[kS], qc[kS], dA[kS];
#pragma unroll
    for (int j = 0; j < kS; j++) {
      const int n = q * kS + j;
      A2[j] = n < p.N ? p.A[int64_t(d) * p.N + n] * kLog2e : 0.f;
      qc[j] = dA[j] = 0.f;  // qc: a_{t+1} G_{t+1}, what the later steps send back to h_t
    }
    float dD_acc = 0.f, ddb_acc = 0.f;
    // dB/dC reducer role: step rs of the round, state rn, rw = 0 (dC) or 1 (dB).
    const int rs = tid % kHalf, rn = (tid / kHalf) % kNP, rw = tid / (kHalf * kNP);
    for (int i = tid; i < kCB; i += kThreads) sm.bias[i] = p.delta_bias ? p.delta_bias[chan_of(i)] : 0.f;

    // Copy role: the next tile's packs into `raw`. Thread pack k = tid + i*kThreads -> channel k / PPC, pack
    // k % PPC; a warp copies whole 64-byte row segments.
    auto issue = [&](int kt) {
      const int64_t tt = int64_t(kt) * kTT;
#pragma unroll
      for (int i = 0; i < KC; i++) {
        const int k = tid + i * kThreads, sc = k / PPC, sp = k % PPC;
        const bool ok = ch0 + sc < p.per_group;
        const int64_t r = row_of(sc) * L, t0 = tt + sp * P;
        copy_pack<T, VEC>(&raw.ch[0][sc][sp * P], static_cast<const T*>(p.u) + r, t0, L, ok);
        copy_pack<T, VEC>(&raw.ch[1][sc][sp * P], static_cast<const T*>(p.delta) + r, t0, L, ok);
        if (Z) copy_pack<T, VEC>(&raw.ch[2][sc][sp * P], Z + r, t0, L, ok);
        copy_pack<T, VEC>(&raw.ch[3][sc][sp * P], static_cast<const T*>(p.dout) + r, t0, L, ok);
      }
#pragma unroll
      for (int i = 0; i < KB; i++) {
        const int m = tid + i * kThreads, w = m / (kNP * PPC), n = (m % (kNP * PPC)) / PPC, sp = m % PPC;
        if (m < NBC)
          copy_pack<T, VEC>(&raw.bc[w][n][sp * P], (w ? Cg : Bg) + int64_t(n < p.N ? n : 0) * L, tt + sp * P, L,
                            n < p.N);
      }
      anvil_cp_async_commit();
    };
    // raw -> f32 tiles (after anvil_cp_async_wait_all and a barrier). Element i*kThreads + tid: channel
    // cs0 + i*kCS, step st, so a warp writes consecutive steps of one channel (and every address is a base
    // plus a constant: nothing per element to keep in registers).
    constexpr int kCS = kThreads / kTT;  // channels per pass
    // Bm/Cm: thread (state bn, step bt0 of each 8-step pass). States n and n + 8 share a bank in the 16-byte aligned
    // raw rows, so states 8-15 take another step pair of the pass than 0-7: 16 banks per read, 32 per store (ncu had
    // 1.3 M excess wavefronts; fwd + bwd 1590.6 -> 1588.6 µs, within noise: docs/mamba_kernels.md, round 18).
    static_assert(kNP == 16 && kThreads / kNP == 8, "8 steps per pass: 4 pairs of 2 kNP threads");
    const int st = tid % kTT, cs0 = tid / kTT, bn = tid % kNP;
    const int bt0 = 2 * ((tid / (2 * kNP)) ^ (bn / (kNP / 2))) + (tid / kNP) % 2;
    auto stage = [&](int kt) {
      const int64_t tt = int64_t(kt) * kTT;
      const bool past = tt + st >= L;
#pragma unroll
      for (int i = 0; i < kChElems / kThreads; i++) {
        const int sc = cs0 + i * kCS;
        const float uu = to_f32(raw.ch[0][sc][st]);
        const float v = to_f32(raw.ch[1][sc][st]) + sm.bias[sc];
        float dt = v, sg = 1.f;
        if (p.softplus) dt = softplus_t<T>(v), sg = v <= 20.f ? sigmoid_t<T>(v) : 1.f;
        if (past) dt = 0.f;  // past L: the identity step (dout, u, z read as zero there)
        const float go = to_f32(raw.ch[3][sc][st]);
        float dy = go, dzf = 0.f, silu = 1.f;
        if (Z) {
          const float zz = to_f32(raw.ch[2][sc][st]), s = sigmoid_t<T>(zz);
          silu = zz * s;
          dy = go * silu;                         // dL/dy = dout * silu(z)
          dzf = go * s * fmaf(zz, 1.f - s, 1.f);  // dL/dz = dzf * y
        }
        sm.d[sc][st] = make_float4(dt, dt * uu, dy, uu);
        sm.e[sc][st] = make_float2(sg, dzf);
        if (p.y) sm.sz[sc][st] = silu;
      }
      // Bm/Cm [n][t] -> [t][n]: element (t, n) with n fastest, so the f32 stores are consecutive.
      constexpr int kPer = kBCElems / kThreads;  // passes per matrix
#pragma unroll
      for (int i = 0; i < 2 * kPer; i++) {
        const int w = i / kPer, t = bt0 + (i % kPer) * (kThreads / kNP);
        (w ? sm.C : sm.B)[t][bn] = to_f32(raw.bc[w][bn][t]);
      }
    };
    // h through steps [t0, t0 + cnt) of the staged tile.
    auto advance = [&](float* h, int t0, int cnt) {
#pragma unroll 1
      for (int t = t0; t < t0 + cnt; t += 4) {
#pragma unroll
        for (int s = 0; s < 4; s++) {
          const float4 dd = sm.d[cc][t + s];
          float bb[kS];
          unpack4(ld4(&sm.B[t + s][q * kS]), bb);
#pragma unroll
          for (int j = 0; j < kS; j++) h[j] = fmaf(ANVIL_EXP2_FTZ(dd.x * A2[j]), h[j], bb[j] * dd.y);
        }
      }
    };
    // h through steps [t0, t0 + cnt) with cnt a compile-time multiple of 4 after unrolling (variant 3's extra
    // advance to the second round of a sub-tile).
    auto advance_unrolled = [&](float* h, int t0, int cnt) {
#pragma unroll
      for (int s = 0; s < kHalf; s++) {
        if (s >= cnt) break;
        const float4 dd = sm.d[cc][t0 + s];
        float bb[kS];
        unpack4(ld4(&sm.B[t0 + s][q * kS]), bb);
#pragma unroll
        for (int j = 0; j < kS; j++) h[j] = fmaf(ANVIL_EXP2_FTZ(dd.x * A2[j]), h[j], bb[j] * dd.y);
      }
    };
    // Where a round's partial sums go: variant 4's warp sums at the start of red, the state sums in pp. Variant 5
    // alternates two of each between rounds (the second pair in red's tail, which the warp sums leave unused), so
    // the writers of round k + 1 cannot disturb the readers of round k and one barrier per round is enough: the
    // next round to write a buffer, k + 2, comes after round k + 1's barrier, which every reader of k has passed.
    auto red_buf = [&](int k) { return &sm.red[0][0] + (ONEBAR && (k & 1) ? kWarps * kRedW : 0); };
    auto pp_buf = [&](int k) {
      return ONEBAR && (k & 1) ? reinterpret_cast<float(*)[kPPS]>(&sm.red[0][0] + 2 * kWarps * kRedW) : sm.pp;
    };
    // Both reductions of one round of kHalf steps starting at tile step tr (tile k of the sequence at tt), from
    // the round's buffers k.
    auto reduce_round = [&](int64_t tt, int tr, int k) {
      float(*const ppb)[kPPS] = pp_buf(k);
      {  // dC / dB: 32 channels of step rs, state rn -> one atomic
        float s = 0.f;
        if constexpr (WRED) {  // the warps' pre-sums (warp_chan_sum), in warp order
          const float* srcw = red_buf(k) + 4 * wred_slot(rw, rn) + rs;
          s = srcw[0];
#pragma unroll
          for (int w = 1; w < kWarps; w++) s += srcw[w * kRedW];
        } else {
          const float* srcr = &sm.red[rs][rw * kCB * kNP + rn];
#pragma unroll
          for (int c = 0; c < kCB; c++) s += srcr[c * kNP];
        }
        const int64_t t = tt + tr + rs;
        if (rn < p.N && t < L) anvil_red_add_f32((rw ? p.dB : p.dC) + sb.bc + int64_t(rn) * L + t, s);
      }
      {  // step rq of channel rc in the round; the outputs replace the step's staged inputs
        const int s = rq;
        // The 4 lanes' partials, from lane (l + rc / 2) % 4 on: rows of 48 floats put channels c and c + 2 on the
        // same banks, and the rotation separates them (32 distinct banks per load). The order of the sum is then a
        // fixed function of the channel: the same run to run.
        float gB = 0.f, dtw = 0.f, ys = 0.f;
#pragma unroll
        for (int l = 0; l < kQ; l++) {
          const float* src = &ppb[rc][((l + rc / 2) % kQ) * kHalf + s];
          gB += src[0 * kQ * kHalf];
          dtw += src[1 * kQ * kHalf];
          ys += src[2 * kQ * kHalf];
        }
        float4& slot = sm.d[rc][tr + s];
        const float4 dd = slot;
        const float2 ee = sm.e[rc][tr + s];
        const float ddt = fmaf(dd.w, gB, dtw * kLn2) * ee.x;  // (u gB + A-part) * d dt / d delta
        const float y = fmaf(dskip, dd.w, ys);                  // the forward's y before the gate
        slot = make_float4(fmaf(dd.x, gB, dskip * dd.z), ddt, ee.y * y, y);  // write_tile gates y
        if (rvalid && tt + tr + s < L) {
          dD_acc = fmaf(dd.z, dd.w, dD_acc);
          ddb_acc += ddt;
        }
      }
    };
    // The tile's du, ddelta, dz as 16-byte packs. Pack k: channel (k % 8) + 8 (k / (8 PPC)), pack (k / 8) % PPC:
    // 8 adjacent threads read 8 channels' float4 of one step (8 bank quads), and a warp stores 8 rows x 64 B.
    auto write_tile = [&](int64_t tt) {
#pragma unroll
      for (int i = 0; i < KC; i++) {
        const int k = tid + i * kThreads, sc = k % 8 + 8 * (k / (8 * PPC)), sp = (k / 8) % PPC;
        if (ch0 + sc >= p.per_group) continue;
        gpu::Pack<T> pu, pd, pz, py;
#pragma unroll
        for (int e = 0; e < P; e++) {
          const float4 o = sm.d[sc][sp * P + e];
          pu.v[e] = from_f32<T>(o.x);
          pd.v[e] = from_f32<T>(o.y);
          pz.v[e] = from_f32<T>(o.z);
        }
        if (p.y) {
#pragma unroll
          for (int e = 0; e < P; e += 4) {
            float g[4];
            unpack4(ld4(&sm.sz[sc][sp * P + e]), g);
#pragma unroll
            for (int j = 0; j < 4; j++) py.v[e + j] = from_f32<T>(sm.d[sc][sp * P + e + j].w * g[j]);
          }
        }
        const int64_t r = row_of(sc) * L, t0 = tt + sp * P, c = chan_of(sc);
        store_pack_at<T, VEC>(static_cast<T*>(p.du) + r, t0, L, pu);
        store_pack_at<T, VEC>(static_cast<T*>(p.ddelta) + r, t0, L, pd);
        if (p.dz) store_pack_at<T, VEC>(static_cast<T*>(p.dz) + p.z_rows.at(b, c), t0, L, pz);
        if (p.y) store_pack_at<T, VEC>(static_cast<T*>(p.y) + p.y_rows.at(b, c), t0, L, py);
      }
    };
    // h entering tile kt: the saved state after tile kt - 1, zero before the sequence.
    auto load_state = [&](int kt, float* h) {
      if (kt == 0 || !valid) {
#pragma unroll
        for (int j = 0; j < kS; j++) h[j] = 0.f;
        return;
      }
      const float* src = p.states + (row * p.nstates + kt - 1) * p.N + q * kS;
      if (p.states16) {
        unpack4(ld4(src), h);
      } else {
#pragma unroll
        for (int j = 0; j < kS; j++) h[j] = q * kS + j < p.N ? src[j] : 0.f;
      }
    };

    // This item's tiles [kt_lo, kt_hi) (one saved state per tile) and the adjoint carry entering them.
    const int kt_lo = seg * p.seg_tiles, kt_hi = min(p.nstates, kt_lo + p.seg_tiles);
    unsigned* const flags = p.work + 1 + int64_t(blk) * p.segs;
    if (SEG && seg + 1 < p.segs) {
      if (tid == 0) {
        const long long t0 = clock64();
        while (atomicAdd(&flags[seg + 1], 0u) == 0u) {
          if (clock64() - t0 > gpu::kWaitCycles) {  // ~10 s: a schedule bug is an error, not a hang
            printf("selective_scan backward: block %d waited on segment %d of channel block %d\n", int(blockIdx.x),
                   seg + 1, blk);
            anvil_trap();
          }
        }
        __threadfence();
      }
      __syncthreads();
      // Written by another SM in this launch: volatile loads go to L2, past this SM's L1.
      const volatile float* cv = reinterpret_cast<const volatile float*>(
          p.carry + (int64_t(blk) * p.segs + seg + 1) * kThreads + tid);
#pragma unroll
      for (int j = 0; j < kS; j++) qc[j] = cv[j];
    }
    if (kOverlap) issue(kt_hi - 1);
    // Without overlap the copy of a tile is issued just before it is staged, into red/pp: their last reader (the
    // previous tile's last reducers) is behind a barrier every thread has passed.
    for (int kt = kt_hi - 1; kt >= kt_lo; kt--) {
      const int64_t tt = int64_t(kt) * kTT;
      float ht[kS];
      load_state(kt, ht);  // issued before the barriers: its latency hides under stage()
      if (!kOverlap) issue(kt);
      anvil_cp_async_wait_all();
      __syncthreads();
      stage(kt);
      __syncthreads();
      if (kOverlap && kt > kt_lo) issue(kt - 1);
      {
        float h[kS] = {ht[0], ht[1], ht[2], ht[3]};
        for (int i = 0; i + 1 < kSubs; i++) {
          advance(h, i * kSub, kSub);
          sm.sub[i][tid] = make_float4(h[0], h[1], h[2], h[3]);
        }
      }
#pragma unroll 1
      for (int i = kSubs - 1; i >= 0; i--) {
        const int tb = i * kSub;
        float hs[kS];
        if (i > 0) unpack4(sm.sub[i - 1][tid], hs);
        else for (int j = 0; j < kS; j++) hs[j] = ht[j];
        if constexpr (!HOLD) {
        // Recompute the sub-tile: a and h of its 8 steps, and the state part of y.
        float a[kSub][kS], h[kSub][kS], ys[kSub];
#pragma unroll
        for (int s = 0; s < kSub; s++) {
          const float4 dd = sm.d[cc][tb + s];
          float bb[kS], cv[kS];
          unpack4(ld4(&sm.B[tb + s][q * kS]), bb);
          unpack4(ld4(&sm.C[tb + s][q * kS]), cv);
          ys[s] = 0.f;
#pragma unroll
          for (int j = 0; j < kS; j++) {
            a[s][j] = ANVIL_EXP2_FTZ(dd.x * A2[j]);
            h[s][j] = fmaf(a[s][j], s > 0 ? h[s - 1][j] : hs[j], bb[j] * dd.y);
            ys[s] = fmaf(cv[j], h[s][j], ys[s]);
          }
        }
        // The adjoint, from the sub-tile's last step down, in rounds of kHalf steps.
#pragma unroll
        for (int r = kSub / kHalf - 1; r >= 0; r--) {
          float gB[kHalf], dtw[kHalf];
#pragma unroll
          for (int s = r * kHalf + kHalf - 1; s >= r * kHalf; s--) {
            const float4 dd = sm.d[cc][tb + s];  // dt, dt*u, dy, u
            float bb[kS], cv[kS], vC[kS], vB[kS];
            unpack4(ld4(&sm.B[tb + s][q * kS]), bb);
            unpack4(ld4(&sm.C[tb + s][q * kS]), cv);
            const int sr = s - r * kHalf;
            gB[sr] = dtw[sr] = 0.f;
#pragma unroll
            for (int j = 0; j < kS; j++) {
              const float G = fmaf(cv[j], dd.z, qc[j]);  // dL/dh_t, all paths
              vC[j] = dd.z * h[s][j];
              vB[j] = G * dd.y;
              gB[sr] = fmaf(G, bb[j], gB[sr]);
              qc[j] = a[s][j] * G;
              const float w = qc[j] * (s > 0 ? h[s - 1][j] : hs[j]);  // dL/d(dt A) at step t
              dtw[sr] = fmaf(A2[j], w, dtw[sr]);
              dA[j] = fmaf(w, dd.x, dA[j]);
            }
            st4(&sm.red[sr][cc * kNP + q * kS], vC[0], vC[1], vC[2], vC[3]);
            st4(&sm.red[sr][kCB * kNP + cc * kNP + q * kS], vB[0], vB[1], vB[2], vB[3]);
          }
          float* pp = &sm.pp[cc][q * kHalf];
          st4(pp, gB[0], gB[1], gB[2], gB[3]);
          st4(pp + kQ * kHalf, dtw[0], dtw[1], dtw[2], dtw[3]);
          st4(pp + 2 * kQ * kHalf, ys[r * kHalf], ys[r * kHalf + 1], ys[r * kHalf + 2], ys[r * kHalf + 3]);
          __syncthreads();  // the round's partial sums are in red and pp
          reduce_round(tt, tb + r * kHalf, 0);
          __syncthreads();  // red and pp are free again; the round's outputs are in sm.d
        }
        } else {
        // Variant 3: per round of kHalf steps, recompute only the round (from hs, advanced through the earlier
        // rounds of the sub-tile: 4 extra steps for the second round) and keep what the adjoint reads of the
        // round -- a, h, B, C and the step's (dt, dt u, dy) -- in registers (16 + 16 + 16 + 16 + 12 = 76, where
        // variant 2 kept a, h of 8 steps = 64). The adjoint then loads nothing from shared memory: per warp and
        // 8-step sub-tile 8 x 3 LDS.128 (d, B, C) = 96 wavefronts fewer (LDS.128 = 4 wavefronts even when the
        // 8 distinct addresses would fit one), for 4 x 2 LDS.128 = 32 more in the extra advance: -64 of ~390.
#pragma unroll
        for (int r = kSub / kHalf - 1; r >= 0; r--) {
          const int t0 = tb + r * kHalf;
          float hr[kS] = {hs[0], hs[1], hs[2], hs[3]};  // h at step t0 - 1
          if (r > 0) advance_unrolled(hr, tb, r * kHalf);
          float a[kHalf][kS], h[kHalf][kS], bb[kHalf][kS], cv[kHalf][kS], dx[kHalf], dyu[kHalf], dyy[kHalf];
          float ys[kHalf];
#pragma unroll
          for (int s = 0; s < kHalf; s++) {
            const float4 dd = sm.d[cc][t0 + s];
            dx[s] = dd.x, dyu[s] = dd.y, dyy[s] = dd.z;
            unpack4(ld4(&sm.B[t0 + s][q * kS]), bb[s]);
            unpack4(ld4(&sm.C[t0 + s][q * kS]), cv[s]);
            ys[s] = 0.f;
#pragma unroll
            for (int j = 0; j < kS; j++) {
              a[s][j] = ANVIL_EXP2_FTZ(dd.x * A2[j]);
              h[s][j] = fmaf(a[s][j], s > 0 ? h[s - 1][j] : hr[j], bb[s][j] * dd.y);
              ys[s] = fmaf(cv[s][j], h[s][j], ys[s]);
            }
          }
          float gB[kHalf], dtw[kHalf], cs[kHalf];  // cs: variant 4's channel sums, one per step
#pragma unroll
          for (int s = kHalf - 1; s >= 0; s--) {
            float vC[kS], vB[kS];
            gB[s] = dtw[s] = 0.f;
#pragma unroll
            for (int j = 0; j < kS; j++) {
              const float G = fmaf(cv[s][j], dyy[s], qc[j]);  // dL/dh_t, all paths
              vC[j] = dyy[s] * h[s][j];
              vB[j] = G * dyu[s];
              gB[s] = fmaf(G, bb[s][j], gB[s]);
              qc[j] = a[s][j] * G;
              const float w = qc[j] * (s > 0 ? h[s - 1][j] : hr[j]);  // dL/d(dt A) at step t
              dtw[s] = fmaf(A2[j], w, dtw[s]);
              dA[j] = fmaf(w, dx[s], dA[j]);
            }
            if constexpr (WRED) {
              const float v8[2 * kS] = {vC[0], vC[1], vC[2], vC[3], vB[0], vB[1], vB[2], vB[3]};
              cs[s] = warp_chan_sum(v8, tid);
            } else {
              st4(&sm.red[s][cc * kNP + q * kS], vC[0], vC[1], vC[2], vC[3]);
              st4(&sm.red[s][kCB * kNP + cc * kNP + q * kS], vB[0], vB[1], vB[2], vB[3]);
            }
          }
          if constexpr (WRED) {
            // Lane (q, j = (tid >> 2) & 7) holds dC|dB j >> 2 of state 4q + (j & 3) for the round's 4 steps: one
            // 16-byte store per lane (one of the two equal halves of a 64-wide warp). Why per round and not a scalar
            // store per step: both are 512 B = 4 wavefronts per warp and round, but this is 1 STS.128 instead of
            // 4 STS.32 (113 instructions per round, 4 x (7 SHFL + 7 FADD + 14 FSEL) + 1, against 116), and the 3
            // extra live floats come after step 3, when that step's a, h, B, C are already dead (sm_90: 168
            // registers and 8 B of stack, variant 3 16 B).
            const int j = (tid >> 2) & 7;
            if (gpu::kWarpSize == 32 || (tid & 32) == 0)
              st4(red_buf(r) + (tid / gpu::kWarpSize) * kRedW + 4 * wred_slot(j >> 2, q * kS + (j & 3)), cs[0],
                  cs[1], cs[2], cs[3]);
          }
          float* pp = &pp_buf(r)[cc][q * kHalf];
          st4(pp, gB[0], gB[1], gB[2], gB[3]);
          st4(pp + kQ * kHalf, dtw[0], dtw[1], dtw[2], dtw[3]);
          st4(pp + 2 * kQ * kHalf, ys[0], ys[1], ys[2], ys[3]);
          __syncthreads();  // the round's partial sums are in red and pp
          reduce_round(tt, t0, r);
          // red and pp are free again; the round's outputs are in sm.d. Variant 5 keeps only the tile's last
          // (write_tile reads every step's outputs): its rounds alternate buffers (red_buf). r alternates within
          // a sub-tile and a sub-tile has an even number of rounds, so consecutive rounds always differ.
          if (!ONEBAR || (i == 0 && r == 0)) __syncthreads();
        }
        }
      }
      write_tile(tt);  // the next barrier (before the next stage) keeps sm.d until every pack has left
    }
#pragma unroll
    for (int j = 0; j < kS; j++)
      if (valid && q * kS + j < p.N) anvil_red_add_f32(p.dA + int64_t(d) * p.N + q * kS + j, dA[j]);
    if (rvalid && p.dD) anvil_red_add_f32(p.dD + rd, dD_acc);
    if (rvalid && p.ddelta_bias) anvil_red_add_f32(p.ddelta_bias + rd, ddb_acc);
    if (SEG && seg > 0) {  // the carry into the segment before: every thread's store is visible before the flag
      p.carry[(int64_t(blk) * p.segs + seg) * kThreads + tid] = make_float4(qc[0], qc[1], qc[2], qc[3]);
      __threadfence();
      __syncthreads();
      if (tid == 0) atomicExch(&flags[seg], 1u);
    }
  }  // items
}

// Time segments per channel block: ANVIL_SCAN_BWD_SEGS, else 8 (at most one per tile) when the blocks leave a
// partial last wave of at most 3/4 of the slots (fewer than 4 waves), else 1. H200: fwd + bwd at the issue's shape
// (640 blocks, 1.62 waves) 1770 -> 1708 us; Mamba-370m and 1.4B (512 blocks, 1.29 waves) train 3-4% faster;
// Mamba-130m (768 blocks, 1.94 waves) lost 0.4% with 8 (measured before the adds became reductions). Read once.
int bwd_segments(int blocks, int slots, int tiles) {
  static const int forced = [] {
    const char* e = std::getenv("ANVIL_SCAN_BWD_SEGS");
    return e && *e ? std::atoi(e) : 0;
  }();
  const int full = blocks / slots, part = blocks % slots;
  const bool tail = full < 4 && part > 0 && 4 * part <= 3 * slots;
  const int want = forced > 0 ? forced : (tail ? 8 : 1);
  return std::max(1, std::min(want, tiles));
}

// The kernel, with its dynamic shared memory allowed (> 48 KB must be asked for on NVIDIA). CUDA: 61.8 KB + the raw
// tile (bf16/f16 10.5 KB -> 72.3 KB, 3 blocks per SM of 228 KB with 1 KB each reserved; f32 20.5 KB -> 82.3 KB, 2
// blocks). HIP: 61.8 KB (the raw tile in red/pp).
template <class T, bool VEC, bool HOLD, bool WRED, bool ONEBAR, bool SEG>
auto bwd_kernel() {
  auto kernel = scan_bwd_async_kernel<T, VEC, HOLD, WRED, ONEBAR, SEG>;
  static const bool attr = [&] {
    ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                        gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<T>())));
    return true;
  }();
  (void)attr;
  return kernel;
}

template <class T, bool VEC, bool HOLD, bool WRED, bool ONEBAR>
void launch_bwd_async(BwdAsyncParams p, Device dev) {
  static const int slots = [] {
    int per_sm = 0;
    const auto kernel = bwd_kernel<T, VEC, HOLD, WRED, ONEBAR, true>();
    ANVIL_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem_bytes<T>()));
    return std::max(1, per_sm) * gpu::device_info(gpu::current_device()).compute_units;
  }();
  p.seg_tiles = gpu::ceil_div(p.nstates, bwd_segments(p.blocks, slots, p.nstates));
  p.segs = gpu::ceil_div(p.nstates, p.seg_tiles);  // no empty segment
  if (p.segs == 1) {  // a block per channel block, scheduled by the hardware
    p.work = nullptr, p.carry = nullptr;
    const auto kernel = bwd_kernel<T, VEC, HOLD, WRED, ONEBAR, false>();
    kernel<<<unsigned(p.blocks), kThreads, smem_bytes<T>(), gpu::stream()>>>(p);
    ANVIL_LAUNCH_CHECK();
    return;
  }
  // Persistent blocks, one per resident slot, taking items by ticket.
  const int64_t items = int64_t(p.blocks) * p.segs;
  Tensor work = Tensor::zeros({1 + items}, DType::i32, dev);
  Tensor carry = Tensor::empty({items * kThreads * 4}, DType::f32, dev);
  p.work = reinterpret_cast<unsigned*>(work.data_ptr());
  p.carry = reinterpret_cast<float4*>(carry.data_ptr());
  const auto kernel = bwd_kernel<T, VEC, HOLD, WRED, ONEBAR, true>();
  kernel<<<unsigned(std::min<int64_t>(items, slots)), kThreads, smem_bytes<T>(), gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}

}  // namespace

int selective_scan_bwd_variant() {
  static const int v = [] {
    const char* e = std::getenv("ANVIL_SCAN_BWD_VARIANT");
    // 5: fwd+bwd 1684-1686 us against 1703 us for 4 (H200, 2026-12-01, two runs each). 4 had measured 2090 us
    // against 2111 us for 3 (2026-11-30); 3 2.19 ms against 2.25 (2), 2.79 (0) and 3.22 (the removed 1) that day.
    return e && *e ? std::atoi(e) : 5;
  }();
  return v;
}

bool selective_scan_bwd_async_gpu(int variant, const Tensor& dout, const Tensor& u, const Tensor& delta,
                                  const Tensor& A, const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip,
                                  const Tensor& z, const Tensor& delta_bias, bool delta_softplus,
                                  const Tensor& states, Tensor& du, Tensor& ddelta, Tensor& dA, Tensor& dB,
                                  Tensor& dC, Tensor& dD, Tensor& dz, Tensor& ddelta_bias, Tensor& out) {
  if ((variant < 2 || variant > 5) || A.size(1) > kNP) return false;
  BwdAsyncParams p;
  p.u = u.data_ptr();
  p.delta = delta.data_ptr();
  p.Bm = Bm.data_ptr();
  p.Cm = Cm.data_ptr();
  p.z = z.defined() ? z.data_ptr() : nullptr;
  p.dout = dout.data_ptr();
  p.du = du.data_ptr();
  p.ddelta = ddelta.data_ptr();
  // dz is written only when z is given (the front-end requires it then).
  p.dz = z.defined() && dz.defined() ? dz.data_ptr() : nullptr;
  p.y = out.defined() ? out.data_ptr() : nullptr;
  p.z_rows = row_strides(dz, u), p.y_rows = row_strides(out, u);
  p.A = A.data<float>();
  p.D_skip = D_skip.defined() ? D_skip.data<float>() : nullptr;
  p.delta_bias = delta_bias.defined() ? delta_bias.data<float>() : nullptr;
  p.states = states.data<float>();
  p.dA = dA.data<float>();
  p.dD = dD.defined() ? dD.data<float>() : nullptr;
  p.ddelta_bias = ddelta_bias.defined() ? ddelta_bias.data<float>() : nullptr;
  p.L = u.size(2);
  p.D = int(u.size(1));
  p.N = int(A.size(1));
  p.G = int(Bm.size(1));
  p.per_group = p.D / p.G;
  p.blocks_per_group = gpu::ceil_div(p.per_group, kCB);
  p.nstates = int(selective_scan_states(p.L, p.N));
  p.softplus = delta_softplus;
  p.states16 = p.N == kNP && gpu::aligned16(states.data_ptr());
  p.blocks = int(u.size(0) * p.G * p.blocks_per_group);
  const ScanGradAccum acc(dB, dC);
  p.dB = acc.dB.data<float>();
  p.dC = acc.dC.data<float>();
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    // 16-byte copies in and 16-byte stores out: every row of every tensor must start on 16 bytes.
    const bool vec = p.L % gpu::Pack<T>::N == 0 &&
                     scan_seq::all_aligned16({&u, &delta, &Bm, &Cm, &z, &dout, &du, &ddelta, &dz, &out});
    if (variant == 5) {
      if (vec) launch_bwd_async<T, true, true, true, true>(p, u.device());
      else launch_bwd_async<T, false, true, true, true>(p, u.device());
    } else if (variant == 4) {
      if (vec) launch_bwd_async<T, true, true, true, false>(p, u.device());
      else launch_bwd_async<T, false, true, true, false>(p, u.device());
    } else if (variant == 3) {
      if (vec) launch_bwd_async<T, true, true, false, false>(p, u.device());
      else launch_bwd_async<T, false, true, false, false>(p, u.device());
    } else {
      if (vec) launch_bwd_async<T, true, false, false, false>(p, u.device());
      else launch_bwd_async<T, false, false, false, false>(p, u.device());
    }
  });
  acc.finish(dB, dC);
  return true;
}

}  // namespace anvil
