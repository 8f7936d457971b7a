// GPU skinny GEMM, ring path: y (M, N) = x (M, K) @ w^T for 1..16 rows of 16-bit x (e4m3fn w with f16 x: 1..32) on
// CUDA sm_90+, the weights
// streamed through a shared-memory ring of tiled bulk copies (backends/gpu/weight_ring.cuh), as decode_stack's
// GEMM phases are. Contract: skinny_gemm.h; dispatch: try_ring in skinny_gemm.cu's run().
//
// Why: the register-buffered kernels (skinny_gemm.cu, skinny_gemm_mma.cu) keep 64 KB of weight loads in flight
// per SM and reached 27-80% of the copy bandwidth on the Llama-8B projections (docs/decode_kernels.md, eighth
// round), while decode_stack's phases, fed by ~190 KB of bulk copies in flight per SM, reached 89-100%.
//
// Work (one block per SM: 12 consumer warps and a producer warp whose lane 0 issues every copy):
// - Block b owns the rows [N b / G, N (b + 1) / G) of w, cut into tiles of 16 rows (the MMA's m; a block's last
//   tile also reads rows of the next block, or zeros past N, and does not store them) and each row into pieces
//   of 1024 bytes (512 bf16 or 1024 fp8 columns). A chunk = (tile, piece) = one 16 KB tiled copy through w's
//   tensor map, or, given w_tiles (skinny_gemm_tiles: the same shares), one linear copy of the pre-tiled chunk.
// - x comes through the copy engine too: per piece, one tiled copy of that piece's columns for XR rows (a power
//   of two >= M, or 24 / 32; rows past M arrive as zeros) into one of the x slots. The output scales go to shared
//   memory once, at the start. So past the start the consumers read no global memory at all: a load from L2 would
//   queue behind the bulk data already headed to the SM (~0.4 µs per 16 KB chunk in flight; docs/decode_kernels.md,
//   fifth round) and stall the warp that issued it. The epilogue's per-output scale loads did, and cost 5-16% of
//   the FP8 batch 4-32 decode step (twenty-fourth round).
// - Passes of at most 12 tiles, of equal size, piece-major inside a pass: x's piece i is copied once per pass and
//   serves every tile's piece i. The 12 warps are 3 groups of 4; group G takes the pass's tiles G, G + 3, G + 6,
//   G + 9 (up to kPerGroup of them) and keeps their sums in registers over the pieces; warp s of a group takes a
//   quarter (256 bytes) of every piece.
// - Products on the tensor cores (m16n8k16, f32 sums), fragments as in skinny_gemm_mma.cu: A = 16 weight rows,
//   B = x^T, one MMA per 8 activation rows (MG = 1, 2, 3 or 4; 3 and 4 only for e4m3fn with f16 x, see kWideRing).
//   e4m3fn weights are converted by the hardware (cvt.rn.f16x2.e4m3x2, 2 instructions per 4 weights) for f16
//   MMAs, so x must be f16: bf16 x is converted in
//   its slot, once per piece, by 3 converter warps, times a power of two per row (convert_x). e4m3fnuz (no
//   hardware conversion) is decoded exactly into the 16-bit type in software, ~13 instructions per 4 weights.
//   From 7 rows (stage_x16), bf16 x is instead staged as f16 once per product by a kernel launched before the
//   ring (stage_x_f16, skinny_gemm_stage.cuh), and e4m3fn takes the f16-x ring with the hardware conversion. A
//   fused prologue (skinny_gemm_fused: the norm or SwiGLU that makes x) runs in that staging kernel
//   (stage_prologue_f16), from 2 rows.
// - At the end of a pass, in up to 4 rounds, the warps put their sums in `part` and the consumer threads add the
//   4 quarters in a fixed order, scale, and store y: deterministic, no atomics.
// - Launched early (gpu::launch_early): the first chunks of weights, which depend on nothing, are in flight
//   before the previous kernel has finished; x and y wait for it.
#include <algorithm>
#include <cstdlib>

#include "kernels/skinny_gemm/skinny_gemm_gpu.cuh"  // first: common.cuh brings the vendor runtime core/ needs
#include "backends/gpu/weight_ring.cuh"
#include "core/env.h"
#include "kernels/skinny_gemm/skinny_gemm.h"
#include "kernels/skinny_gemm/skinny_gemm_stage.cuh"
#include "kernels/swiglu/swiglu_gpu.cuh"

namespace anvil {
namespace skinny {

#if defined(ANVIL_HAS_BULK_COPY) && defined(ANVIL_HAS_MMA16816)
namespace {
using gpu::ring::kChunk;
using gpu::ring::kTileBytes;
using gpu::ring::kTileRows;

constexpr int kRingWarps = 12;                       // consumer warps
constexpr int kConsumers = kRingWarps * kWarp;
constexpr int kConvWarps = 3;                        // bf16 x to f16 for e4m3fn weights (idle otherwise)
// + the producer warp and the converters: 16 warps, 4 per scheduler, so 128 registers each as with 13.
constexpr int kRingThreads = kConsumers + kWarp + kConvWarps * kWarp;
// e4m3fn weights: hardware conversion and f16 MMAs; with bf16 x the converter warps stage x as f16 (convert_x).
// Not with bf16 x at 9-16 rows: there the converters (~0.6 µs per 16-row piece, estimated) set the pace of those whose
// blocks have few tiles per piece (H200, µs in a graph, 16 rows, hardware / software decode: o 13.1 / 11.0, down
// 34.0 / 29.0, q|k|v 15.2 / 13.9, gate|up 44.9 / 50.7), so the software decode keeps them.
template <class WT, bool XBF16, int MG>
constexpr bool kHwFp8 = std::is_same<WT, WE4m3<false>>::value && (MG == 1 || !XBF16);
template <class WT, bool XBF16, int MG>
constexpr bool kConvX = kHwFp8<WT, XBF16, MG> && XBF16;
constexpr int kQuarters = 4;                         // warps per tile
constexpr int kGroups = kRingWarps / kQuarters;      // tiles in work at once
// A warp's tiles per pass, their sums in registers: 4 (16 or 32 accumulators per lane at 8 or 16 rows); 3 at 24
// rows (36, 112 registers; 2 tiles ran FP8 batch 17 / 20 / 24 decode 0.3-0.4% slower on the H200); 2 at 32 rows,
// where 4 tiles' 64 accumulators spilled (288 bytes of stack at the 128-register cap).
template <int MG>
constexpr int kPerGroup = MG == 4 ? 2 : MG == 3 ? 3 : 4;
template <int MG>
constexpr int kPassTiles = kGroups * kPerGroup<MG>;  // tiles per pass at most
constexpr int kMaxSlots = 12;                        // 192 KB of weights in flight per SM
constexpr int kMinSlots = 4;
constexpr int kMaxXSlots = 16;
constexpr int kMaxXRows = 16;                        // x rows of the converters' inverse scales (MG = 1 only)
// 17..32 rows (MG = 3 up to 24 rows, 4 above): e4m3fn weights with f16 x only (staged from bf16 by stage_x_f16 /
// stage_prologue_f16). Past 16 rows FP8 otherwise quantises x per token for cuBLASLt, whose one FP8 algorithm with
// row and channel scales ran at 30-58% of copy on the 8B projections at 32 rows (H200, in a graph: q|k|v 16.7, o
// 14.4, gate|up 48.4, down 38.2 us), slower than bf16's cuBLASLt on down. Four row groups need an x slot of 64 KB
// (32 rows x 1024 columns of f16), so the ring has 4 slots there; three, 48 KB slots and 6 ring slots.
constexpr int kWideRows = 32;
constexpr int kThreeGroupRows = 24;  // 17..24 rows: MG = 3
template <class WT, bool XBF16>
constexpr bool kWideRing = std::is_same<WT, WE4m3<false>>::value && !XBF16;
constexpr int kRingMinRowsFp8 = 9;                   // see try_ring
constexpr int64_t kRingMinBytesFp8Row = 20 << 20;    // see try_ring
constexpr int kBarConsumers = 1;                     // hardware barrier id of the consumer warps
static_assert(kRingWarps % kQuarters == 0, "ring work split");
static_assert(kConsumers == kGroups * kTileRows * 8, "the epilogue: a thread per (group, tile row, row mod 8)");
static_assert(kWarp == kAnvilMmaLanes, "the m16n8k16 fragment layout is defined over 32 lanes");

struct RingCfg {
  int slots;    // ring slots of kChunk bytes
  int xr;       // x rows per x slot: 8 MG, or 1, 2, 4 at MG = 1
  int x_lines;  // 128-byte lines of one x row per piece (16-bit x: 2 bytes per weight column)
  int x_slot;   // bytes per x slot: 128 * xr * x_lines
  int xslots;   // x slots: enough pieces ahead for the ring to stay full when a pass has few tiles
  int ppr;      // pieces per weight row
  int tp;       // tiles per pass (pass_tiles of the largest block's tiles)
  int srows;    // output scales held per block: its tiles at most x 16 rows
};
struct RingMaps {
  CUtensorMap w;  // gpu::ring::encode_weight_tiles
  CUtensorMap x;  // (64 elements, M rows, K / 64 lines), box (64, xr, x_lines), 128-byte swizzled
};

// The block's tiles [ua, ub) of pass q: passes of equal size (to a tile), at most kPassTiles<MG>. H200, gate|up's 14
// tiles per block as 7 + 7 against 12 + 2, µs in a graph: bf16 61.8 / 63.2 (1 row), 62.1 / 63.4 (4 rows); e4m3fn
// 36.1 / 37.5, 36.4 / 38.0. A 2-tile pass leaves a group idle and the ring a third full (its x slots reach only 2
// pieces ahead; 16 x slots did not change it), which outweighs 7-tile passes' uneven groups (3, 2, 2 tiles).
struct Pass {
  int ua, ub;
};
int pass_tiles(int units, int most) {
  const int passes = (units + most - 1) / most;
  return (units + passes - 1) / passes;
}
__device__ __forceinline__ Pass pass_of(int units, int tp, int q) { return {q * tp, min(units, (q + 1) * tp)}; }

// The weights the ring reads: bf16, f16, e4m3fn, e4m3fnuz, rows of whole 128-byte lines and whole 64-value x
// lines, on a GPU with bulk copies and bf16 MMAs.
bool ring_reads(const DeviceInfo& info, DType wd, int64_t K) {
  const bool dt = wd == DType::bf16 || wd == DType::f16 || wd == DType::e4m3fn || wd == DType::e4m3fnuz;
  return info.bulk_copy && info.bf16_compute && dt && (K * dtype_size(wd)) % 128 == 0 && K % 64 == 0;
}
// One block per SM at most and per tile: ring_layout::fit_grid's (the fewest padded chunks in all, no longer share:
// 8B's gate|up over 128 blocks reads 1792 tiles, over 132 1848), or ANVIL_SKINNY_RING_GRID=n blocks at most (A/B
// timing; read once, as the pre-tiled copies are laid out for it).
int ring_grid(const DeviceInfo& info, int N) {
  static const int forced = env_int("skinny_gemm", "ANVIL_SKINNY_RING_GRID", 1, 1 << 20, 0);  // 0: unset
  const int most = std::min(forced ? forced : info.compute_units, gpu::ceil_div(N, kTileRows));
  if (forced) return most;
  const ring_layout::Cut cut{N, kTileRows, 1};
  return ring_layout::fit_grid(&cut, 1, most);
}

// wt: the block's first chunk of the pre-tiled copy (its chunks follow tile-major), or null: the tensor map.
__device__ void ring_produce(const RingCfg& rc, const RingMaps& maps, const uint8_t* wt, int r0, int units,
                             int passes, uint8_t* ring, uint8_t* xs, uint64_t* full, uint64_t* empty,
                             volatile unsigned* issued, uint64_t* xfull, uint64_t* xempty, volatile unsigned* xissued) {
  const uint64_t policy = anvil_l2_evict_first();  // weights are read once: x and y stay in L2
  unsigned c = 0, xc = 0;
  // Copies go out as soon as their slot frees. Spaced at least 600 / 900 SM cycles apart, as decode_stack's FP8
  // producer is, the e4m3fn projections took 0-1% / 1-7% longer (H200, in a graph; docs/decode_kernels.md,
  // twentieth round): the ring alone is not hurt by bursts.
  auto copy_w = [&](int tile, int piece) {
    const unsigned slot = c % unsigned(rc.slots), use = c / unsigned(rc.slots);
    gpu::ring::claim_slot(full, empty, slot, use, kChunk, c);
    uint8_t* dst = ring + size_t(slot) * kChunk;
    if (wt)  // 16 KB at one address
      anvil_bulk_copy_g2s(dst, wt + (int64_t(tile) * rc.ppr + piece) * kChunk, unsigned(kChunk), &full[slot], policy);
    else  // 16 runs of 1 KB, one per row
      anvil_tile_copy_g2s_3d(dst, &maps.w, 0, r0 + tile * kTileRows, piece * (kTileBytes / 128), &full[slot], policy);
    issued[slot] = use;
    c++;
  };
  // The first chunks of piece 0 (as many as the ring holds) depend on nothing the previous kernel writes.
  const int tp = rc.tp;
  const Pass p0 = pass_of(units, tp, 0);
  const int pre = min(p0.ub - p0.ua, rc.slots);
  for (int u = 0; u < pre; u++) copy_w(u, 0);
  anvil_wait_prior_grid();
  for (int q = 0; q < passes; q++) {
    const Pass ps = pass_of(units, tp, q);
    for (int i = 0; i < rc.ppr; i++) {
      const unsigned xslot = xc % unsigned(rc.xslots), xuse = xc / unsigned(rc.xslots);
      gpu::ring::claim_slot(xfull, xempty, xslot, xuse, unsigned(rc.x_slot), xc);
      anvil_tile_copy_g2s_3d(xs + size_t(xslot) * rc.x_slot, &maps.x, 0, 0, i * rc.x_lines, &xfull[xslot]);
      xissued[xslot] = xuse;
      xc++;
      for (int u = ps.ua; u < ps.ub; u++)
        if (q > 0 || i > 0 || u >= pre) copy_w(u, i);
    }
  }
}

// threadIdx.x, read where it is used: the epilogue's per-thread indices, computed once before the pass loop by the
// compiler, stayed live across the chunk loop (7-10 more registers, and spills at the 128-register cap).
__device__ __forceinline__ int tid_here() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// Where the 16 bytes of x row `row` at byte o of the piece sit in an x slot laid out as [line][row][128 B],
// 128-byte swizzled: line L = (o / 128) * xr + row, its 16-byte chunk (o / 16) % 8 at ((o / 16) % 8) ^ (L % 8).
__device__ __forceinline__ int x_offset(int xr, int row, int o) {
  const int L = (o >> 7) * xr + row;
  return (L << 7) + ((((o >> 4) & 7) ^ (L & 7)) << 4);
}
__device__ __forceinline__ uint4 x_load(const uint8_t* xsl, int xr, int row, int o) {
  return *reinterpret_cast<const uint4*>(xsl + x_offset(xr, row, o));
}

// e4m3fn weights on the f16 MMAs: 4 weight bytes to A's registers lo (weights 0, 1) and hi (2, 3), exactly.
__device__ __forceinline__ void e4m3fn_quad(uint32_t w, uint32_t& lo, uint32_t& hi) {
#ifdef ANVIL_HAS_E4M3_CVT
  anvil_e4m3x4_to_f16x2(w, lo, hi);
#else
  lo = hi = 0;
  __trap();  // the ring runs on sm_90+ only
#endif
}

// The larger magnitudes of two bf16 pairs, pair by pair (the sign bits are the XOR of the inputs': mask them).
// NaN loses to a number; a NaN x still converts to NaN.
__device__ __forceinline__ uint32_t absmax_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Converter warp cw: every x piece, in the producer's order, once it has landed, from bf16 to f16 in place, for
// the f16 MMAs of e4m3fn weights. Row r (< M; rows past M are zeros in both types) is scaled by 2^sh so that its
// largest |x| over the piece's 1024 columns lands in [2^14, 2^15): every value >= that max * 2^-28 converts
// exactly (f16 keeps 11 bits, bf16 has 8) and the rest err by < 2^-39 of the max, so the products keep bf16's
// values to f32 accuracy, and rows f16 could not hold (|x| > 65504, or < 2^-14 where f16 loses bits) are no
// problem. xinv[slot][r] = 2^-sh undoes it on the consumers' f32 sums of the piece. sh is clamped to [-126, 126]
// so both powers are normal f32; an inf / NaN row keeps its inf / NaN. Then each converter arrives on
// xready[slot] (kConvWarps arrivals complete it) and publishes the use in xconv[slot], which the consumers wait
// for instead of the copy.
// Work (up to 8 rows: see kHwFp8): a warp takes two rows at a time, 16 lanes per row and 8 independent 16-byte
// chunks per lane; the max is a tree, then 4 shuffles. ~28 instructions per chunk, 20 of them the conversion.
__device__ void convert_x(const RingCfg& rc, int M, int passes, uint8_t* xs, uint64_t* xfull,
                          volatile unsigned* xissued, uint64_t* xready, volatile unsigned* xconv, float* xinv, int cw) {
  constexpr int kLanesPerRow = kWarp / 2;
  constexpr int kPer = kTileBytes * 2 / 16 / kLanesPerRow;  // 16-byte chunks of a row's piece per lane: 8
  const int lane = int(threadIdx.x) % kWarp, hl = lane % kLanesPerRow;
  unsigned xc = 0;
  for (int q = 0; q < passes; q++)
    for (int i = 0; i < rc.ppr; i++, xc++) {
      const unsigned slot = xc % unsigned(rc.xslots), use = xc / unsigned(rc.xslots);
      gpu::ring::wait_chunk(xissued, xfull, slot, use, xc);
      uint8_t* xsl = xs + size_t(slot) * rc.x_slot;
      for (int r0 = 2 * cw; r0 < M; r0 += 2 * kConvWarps) {
        const int r = r0 + lane / kLanesPerRow;
        const bool live = r < M;  // the other half's row may be live: every lane takes part in the shuffles
        int off[kPer];
        uint4 v[kPer];
        uint32_t m[kPer];  // per chunk, the pair of largest |x| (sign bits aside), then a tree over the chunks
#pragma unroll
        for (int e = 0; e < kPer; e++) {
          off[e] = x_offset(rc.xr, r, 16 * (hl + kLanesPerRow * e));
          v[e] = live ? *reinterpret_cast<const uint4*>(xsl + off[e]) : make_uint4(0, 0, 0, 0);
          m[e] = absmax_bf16x2(absmax_bf16x2(v[e].x, v[e].y), absmax_bf16x2(v[e].z, v[e].w));
        }
#pragma unroll
        for (int w = kPer / 2; w > 0; w /= 2)
#pragma unroll
          for (int e = 0; e < w; e++) m[e] = absmax_bf16x2(m[e], m[e + w]);
        uint32_t mx = max(m[0] & 0x7fffu, (m[0] >> 16) & 0x7fffu);  // |x| as bf16 bits: they order as integers
#pragma unroll
        for (int o = kLanesPerRow / 2; o > 0; o /= 2) mx = max(mx, unsigned(ANVIL_SHFL_XOR(mx, o, kWarp)));
        const int sh = x16_shift(mx);
        const float scale = exp2_int(sh);
        auto f16x2 = [scale](uint32_t b) { return bf16x2_to_f16x2(b, scale); };
        if (live) {
#pragma unroll
          for (int e = 0; e < kPer; e++)
            *reinterpret_cast<uint4*>(xsl + off[e]) =
                make_uint4(f16x2(v[e].x), f16x2(v[e].y), f16x2(v[e].z), f16x2(v[e].w));
          if (hl == 0) xinv[slot * kMaxXRows + r] = exp2_int(-sh);
        }
      }
      anvil_fence_proxy_async_smem();  // the slot's next fill is a copy
      __syncwarp();
      if (lane == 0) anvil_mbar_arrive(&xready[slot]), xconv[slot] = use;
    }
}

template <class WT, bool XBF16, int MG>
__global__ void __launch_bounds__(kRingThreads, 1)
    skinny_ring_kernel(const Params p, const RingCfg rc, const __grid_constant__ RingMaps maps) {
  constexpr int Q = 16 / WT::kBytes / 4;      // MMAs per 16 weight bytes and x row group: 2 (bf16/f16), 4 (fp8)
  constexpr int XW = 16 / WT::kBytes / 2;     // x words (16-bit pairs) per 16 weight bytes: 4 or 8
  // Independent MMA chains per tile: a chunk is 16 (fp8) or 8 (bf16) dependent MMAs per warp in one chain; two
  // halve that latency. At MG = 2 the second chain's 32 registers would spill.
  constexpr int CH = MG == 1 ? 2 : 1;
  // x's 16-byte pieces per row group loaded at once: all of a step's (XW / 4) up to 16 rows; one at 24 and 32 rows,
  // where the accumulators leave no room for the 24-32 registers of a whole step's x.
  constexpr int HB = MG >= 3 ? 1 : XW / 4;
  constexpr bool kHw = kHwFp8<WT, XBF16, MG>, kConv = kConvX<WT, XBF16, MG>;
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* ring = smem;
  uint8_t* xs = smem + size_t(rc.slots) * kChunk;
  float* part = reinterpret_cast<float*>(xs + size_t(rc.xslots) * rc.x_slot);  // [warp][value][lane]: conflict-free
  uint64_t* full = reinterpret_cast<uint64_t*>(part + kRingWarps * MG * 4 * kWarp);
  uint64_t* empty = full + rc.slots;
  uint64_t* xfull = empty + rc.slots;
  uint64_t* xempty = xfull + rc.xslots;
  volatile unsigned* issued = reinterpret_cast<volatile unsigned*>(xempty + rc.xslots);
  volatile unsigned* done = issued + rc.slots;
  volatile unsigned* xissued = done + rc.slots;
  volatile unsigned* xdone = xissued + rc.xslots;
  volatile unsigned* xconv = xdone + rc.xslots;
  uint64_t* xready = reinterpret_cast<uint64_t*>(const_cast<unsigned*>(xconv + rc.xslots + (rc.xslots & 1)));
  float* xinv = reinterpret_cast<float*>(xready + rc.xslots);  // [x slot][kMaxXRows]
  float* oscale = xinv + rc.xslots * kMaxXRows;                 // [srows]: out_scale of the block's rows
  float* rscale = oscale + rc.srows;                            // [kWideRows]: y_row_scale, or 1
  if (threadIdx.x == 0) {
    if ((anvil_smem_u32(ring) & 1023u) != 0) {  // the 128-byte swizzle's alignment
      printf("skinny_gemm ring: the ring starts at shared address %u, not on 1024 bytes\n", anvil_smem_u32(ring));
      __trap();
    }
    for (int s = 0; s < rc.slots; s++) {
      anvil_mbar_init(&full[s], 1), anvil_mbar_init(&empty[s], 1);
      issued[s] = ~0u, done[s] = 0;
    }
    for (int s = 0; s < rc.xslots; s++) {
      anvil_mbar_init(&xfull[s], 1), anvil_mbar_init(&xempty[s], 1), anvil_mbar_init(&xready[s], kConvWarps);
      xissued[s] = ~0u, xdone[s] = 0, xconv[s] = ~0u;
    }
    anvil_mbar_init_fence();
  }
  if constexpr (kConv)  // rows past M are never converted: their sums are not stored, but keep them finite
    for (int r = int(threadIdx.x); r < rc.xslots * kMaxXRows; r += int(blockDim.x)) xinv[r] = 1.f;
  __syncthreads();

  const int r0 = int(int64_t(p.N) * blockIdx.x / gridDim.x), r1 = int(int64_t(p.N) * (blockIdx.x + 1) / gridDim.x);
  const int units = (r1 - r0 + kTileRows - 1) / kTileRows;
  const int passes = (units + rc.tp - 1) / rc.tp;
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) {
      const int64_t first = ring_layout::pretiled_chunk(p.N, rc.ppr, int(gridDim.x), int(blockIdx.x), 0, 0);
      const uint8_t* wt = p.w_tiles ? p.w_tiles + first * kChunk : nullptr;
      ring_produce(rc, maps, wt, r0, units, passes, ring, xs, full, empty, issued, xfull, xempty, xissued);
    }
    const int cw = int(threadIdx.x - kConsumers) / kWarp - 1;
    if (kConv && cw >= 0) convert_x(rc, p.M, passes, xs, xfull, xissued, xready, xconv, xinv, cw);
    anvil_allow_next_grid();
    return;
  }

  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, g = lane / 4, t = lane % 4;
  const int grp = warp / kQuarters, s = warp % kQuarters;
  // The MMA's rows g and g + 8 are the tile's rows pr and pr + 8, pr = g / 2 + 4 (g % 2): a quarter-warp's two g
  // read rows 4 apart, whose swizzles (row % 8) put their 64 bytes on disjoint banks (as decode_stack's tiles).
  const int pr = (g >> 1) | ((g & 1) << 2);
  const int row_bytes = p.K * WT::kBytes;
  anvil_wait_prior_grid();  // y may still be read by the previous kernel
  // The output scales, once per block: the epilogue's loop read them from global memory per output, 3 loads each
  // issued after the previous output's store and queued behind the copies in flight, 24 round trips in a row per
  // thread at 32 rows on gate|up. The epilogue's first barrier publishes them.
  for (int i = int(threadIdx.x); i < r1 - r0; i += kConsumers) oscale[i] = out_scale(p, r0 + i);
  for (int m = int(threadIdx.x); m < p.M; m += kConsumers) rscale[m] = p.y_row_scale ? p.y_row_scale[m] : 1.f;
  unsigned c = 0, xc = 0;
  const int tp = rc.tp;
  for (int q = 0; q < passes; q++) {
    const Pass ps = pass_of(units, tp, q);
    const int T = ps.ub - ps.ua;
    const int mine = T > grp ? (T - grp + kGroups - 1) / kGroups : 0;  // this group's tiles in the pass
    const unsigned xreaders = unsigned(kQuarters * min(T, kGroups));
    float acc[kPerGroup<MG>][MG][CH][4];
    uint32_t nan[kPerGroup<MG>][2];
#pragma unroll
    for (int j = 0; j < kPerGroup<MG>; j++) {
      nan[j][0] = nan[j][1] = 0;
#pragma unroll
      for (int mg = 0; mg < MG; mg++)
#pragma unroll
        for (int h = 0; h < CH; h++)
#pragma unroll
          for (int i = 0; i < 4; i++) acc[j][mg][h][i] = 0.f;
    }
    for (int i = 0; i < rc.ppr; i++, xc++) {
      if (mine == 0) continue;
      const unsigned xslot = xc % unsigned(rc.xslots);
      if (kConv) gpu::ring::wait_chunk(xconv, xready, xslot, xc / unsigned(rc.xslots), xc);
      else gpu::ring::wait_chunk(xissued, xfull, xslot, xc / unsigned(rc.xslots), xc);
      const uint8_t* xsl = xs + size_t(xslot) * rc.x_slot;
      const int valid = min(kTileBytes, row_bytes - i * kTileBytes);  // bytes of the rows in this piece
#pragma unroll
      for (int j = 0; j < kPerGroup<MG>; j++) {
        if (j >= mine) break;
        const unsigned cc = c + unsigned(i * T + grp + j * kGroups), slot = cc % unsigned(rc.slots);
        gpu::ring::wait_chunk(issued, full, slot, cc / unsigned(rc.slots), cc);
        const uint8_t* wr = ring + size_t(slot) * kChunk;
        float d[MG][CH][4] = {};  // with kConv, the piece's sums in x's scaled units, folded into acc below
        float(&sum)[MG][CH][4] = kConv ? d : acc[j];
#pragma unroll
        for (int st = 0; st < kTileBytes / kQuarters / 64; st++) {
          const int kb = s * (kTileBytes / kQuarters) + 64 * st;  // warp-uniform: the MMAs need every lane
          if (kb >= valid) break;
          const int k = kb + 16 * t;
          const uint4 lo = *reinterpret_cast<const uint4*>(wr + gpu::ring::tile_offset(pr, k));
          const uint4 hi = *reinterpret_cast<const uint4*>(wr + gpu::ring::tile_offset(pr + 8, k));
          const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int h0 = 0; h0 < XW / 4; h0 += HB) {  // x's 16-byte pieces, HB of them per row group at once
            uint32_t xv[MG][4 * HB];
#pragma unroll
            for (int mg = 0; mg < MG; mg++) {
              const int xrow = min(mg * 8 + g, rc.xr - 1);  // rows past xr feed only outputs that are not stored
#pragma unroll
              for (int h = 0; h < HB; h++) {
                const int o = k * (2 / WT::kBytes) + 16 * (h0 + h);
                // At 17..32 rows (xr = 24 or 32) row 8 mg + g sits 8 mg lines after row g with the same swizzle:
                // one offset for the row groups, where four kept across the chunk loop spilled.
                const uint4 v = MG >= 3 ? *reinterpret_cast<const uint4*>(xsl + x_offset(rc.xr, g, o) + mg * 8 * 128)
                                        : x_load(xsl, rc.xr, xrow, o);
                xv[mg][4 * h] = v.x, xv[mg][4 * h + 1] = v.y, xv[mg][4 * h + 2] = v.z, xv[mg][4 * h + 3] = v.w;
              }
            }
#pragma unroll
            for (int qh = 0; qh < 2 * HB; qh++) {
              const int qq = 2 * h0 + qh;
              uint32_t a[4];
              if constexpr (kHw) {
                e4m3fn_quad(wl[qq], a[0], a[2]);
                e4m3fn_quad(wh[qq], a[1], a[3]);
              } else {
                mma_quad<WT, XBF16>(wl, qq, a[0], a[2], nan[j][0]);
                mma_quad<WT, XBF16>(wh, qq, a[1], a[3], nan[j][1]);
              }
#pragma unroll
              for (int mg = 0; mg < MG; mg++) {
                const uint32_t b[2] = {xv[mg][2 * qh], xv[mg][2 * qh + 1]};
                anvil_mma16816<XBF16 && !kHw>(sum[mg][qq % CH], a, b);
              }
            }
          }
        }
        if constexpr (kConv)
#pragma unroll
          for (int mg = 0; mg < MG; mg++)
#pragma unroll
            for (int h = 0; h < CH; h++)
#pragma unroll
              for (int v = 0; v < 4; v++)  // D's columns 2t, 2t + 1 are x rows 8 mg + 2t, 8 mg + 2t + 1
                acc[j][mg][h][v] += d[mg][h][v] * xinv[xslot * kMaxXRows + min(mg * 8 + 2 * t + (v & 1), rc.xr - 1)];
        gpu::ring::release_slot(done, empty, slot, kQuarters);
      }
      gpu::ring::release_slot(xdone, xempty, xslot, xreaders);
    }
    if (q + 1 == passes) anvil_allow_next_grid();

    // The pass's sums: round j brings tiles 3j .. 3j + 2 (one per group) through `part`.
    const int rounds = (T + kGroups - 1) / kGroups;
#pragma unroll
    for (int j = 0; j < kPerGroup<MG>; j++) {
      if (j >= rounds) break;
      if (j < mine) {
        if constexpr (is_fp8<WT>) {  // a NaN code anywhere in a row (over the 4 lanes of its g) makes it NaN
          nan[j][0] |= ANVIL_SHFL_XOR(nan[j][0], 1, kWarp), nan[j][1] |= ANVIL_SHFL_XOR(nan[j][1], 1, kWarp);
          nan[j][0] |= ANVIL_SHFL_XOR(nan[j][0], 2, kWarp), nan[j][1] |= ANVIL_SHFL_XOR(nan[j][1], 2, kWarp);
        }
        float* mine_part = part + warp * MG * 4 * kWarp;
#pragma unroll
        for (int mg = 0; mg < MG; mg++)
#pragma unroll
          for (int i = 0; i < 4; i++)
            mine_part[(mg * 4 + i) * kWarp + lane] =
                nan[j][i >> 1] ? bits_f32(0x7fc00000u)
                               : (CH == 2 ? acc[j][mg][0][i] + acc[j][mg][1][i] : acc[j][mg][0][i]);
      }
      anvil_bar_sync(kBarConsumers, kConsumers);
      // Thread (G, r, ml) adds the 4 quarters of tile row r for activation rows ml, ml + 8, ... of group G's tile,
      // and stores them: 16 consecutive n per half-warp. ml gives a warp's two halves different t (= ml / 2), so
      // their reads of `part` fall on different banks.
      const int tx = tid_here(), G = tx / (kConsumers / kGroups), e = tx % (kConsumers / kGroups);
      const int r = e % kTileRows, mi = e / kTileRows, ml = ((mi >> 1) & 1) | ((mi & 1) << 1) | (mi & 4);
      const int u = G + j * kGroups, n = r0 + (ps.ua + u) * kTileRows + r;
      if (u < T && n < r1 && ml < p.M) {
        // Inverse of the fragment map: tile row r = pr(g) + 8 (i / 2), activation row m = 8 mg + 2 t + i % 2.
        const int rr = r & 7, ln = (((rr & 3) << 1) | (rr >> 2)) * 4 + (ml >> 1);
        const float os = oscale[n - r0];
#pragma unroll
        for (int mg = 0; mg < MG; mg++) {
          const int m = ml + 8 * mg;
          if (m >= p.M) break;
          const int v = mg * 4 + (r >> 3) * 2 + (m & 1);
          float sum = 0.f;
#pragma unroll
          for (int sq = 0; sq < kQuarters; sq++) sum += part[((G * kQuarters + sq) * MG * 4 + v) * kWarp + ln];
          store_y(p, int64_t(m) * p.N + n, sum * os * rscale[m]);
        }
      }
      anvil_bar_sync(kBarConsumers, kConsumers);  // part is rewritten by the next round
    }
    c += unsigned(T * rc.ppr);
  }
}

// e4m3fn weights with bf16 x: stage x as f16 once per product (stage_x_f16, or stage_prologue_f16 when a norm or
// SwiGLU makes x) and run the f16-x ring, or convert it in the ring (convert_x; the software decode from 9 rows).
// ANVIL_SKINNY_X16 unset: plain x from kStageX16MinRows rows, a prologue from kStagePrologueMinRows; 0: never; 1: at
// every row count; anything else is an error. Read per call, so the op cases can compare the ways in one process.
// H200, 8B FP8 decode loop, ms per step (docs/decode_kernels.md, twenty-first and twenty-second rounds):
// - plain x (the o projection), staged / converted in the ring: batch 6 3.233 / 3.227, batch 7 3.253 / 3.271, batch
//   8 3.39 / 3.50, batch 16 3.81 / 4.37. The staging is one more launch and pass over x per product, which the
//   ring's savings repay from 7 rows.
// - a prologue, staged with it / norm or SwiGLU kernel then the ring: batch 8 3.26 / 3.39, batch 16 3.69 / 3.82.
//   There the staging replaces the norm's or SwiGLU's kernel instead of adding one, so it pays from fewer rows.
constexpr int kStageX16MinRows = 7;
constexpr int kStagePrologueMinRows = 2;
bool stage_x16(int M, bool prologue) {
  const char* e = std::getenv("ANVIL_SKINNY_X16");
  if (!e || !*e) return M >= (prologue ? kStagePrologueMinRows : kStageX16MinRows);
  const std::string v = e;
  ANVIL_CHECK(v == "0" || v == "1", "skinny_gemm", "ANVIL_SKINNY_X16 unset, 0 or 1", v);
  return v == "1";
}

// x's tile map: (M, K) 16-bit values seen as (64 values, M rows, K / 64 lines) with strides (2K, 128) bytes, so a
// (64, xr, x_lines) box is rows [0, xr) x lines [l, l + x_lines) laid out as [line][row][128 B], 128-byte swizzled.
std::string encode_x_map(void* map128, const Params& p, const RingCfg& rc) {
  const uint64_t dims[3] = {64, uint64_t(p.M), uint64_t(p.K) / 64}, strides[2] = {uint64_t(p.K) * 2, 128};
  const uint32_t box[3] = {64, uint32_t(rc.xr), uint32_t(rc.x_lines)};
  return gpu::vendor::encode_tile_map(map128, 3, 2, p.x, dims, strides, box, true);
}

template <class WT, bool XBF16, int MG>
bool launch_ring(const Params& p) {
  const auto info = gpu::device_info(gpu::current_device());
  RingCfg rc{};
  const int row_bytes = p.K * WT::kBytes;
  rc.ppr = (row_bytes + kTileBytes - 1) / kTileBytes;
  rc.xr = 1;
  while (rc.xr < p.M) rc.xr *= 2;
  // 17..24 rows: three row groups, xr = 24 (MG = 3, its own kernel). A first build of it tested xr at run time in
  // the MMA loop of the MG = 4 kernel, which compiled to 98 registers instead of 117 and ran every row count slower
  // (H200, FP8 batch 17 / 24 / 32: 4.94 / 5.07 / 5.49 ms against 4.34 / 4.30 / 4.57).
  if (MG >= 3) rc.xr = 8 * MG;
  rc.x_lines = kTileBytes / WT::kBytes * 2 / 128;
  rc.x_slot = 128 * rc.xr * rc.x_lines;
  // Shared memory: the ring, the x slots, the sums, per ring slot two barriers and two counters, per x slot three
  // barriers, three counters, 16 inverse scales and 4 bytes of alignment (the kernel's carve-up). The
  // producer issues x's piece before that piece's chunks and waits for a free x slot, so the ring stays full only
  // if the x slots reach as many pieces ahead as the ring holds chunks: slots / T + 1 of them for T tiles a pass.
  // The most ring slots for which those fit.
  const int grid = ring_grid(info, p.N);
  const int units = gpu::ceil_div(gpu::ceil_div(p.N, grid), kTileRows);  // a block's tiles at most
  const int T = rc.tp = pass_tiles(units, kPassTiles<MG>);
  const int64_t part_bytes = int64_t(kRingWarps) * MG * 4 * kWarp * 4;
  rc.srows = units * kTileRows;
  const int64_t scale_bytes = int64_t(rc.srows + kWideRows) * 4;
  auto bytes = [&](int slots, int xslots) {
    return int64_t(slots) * (kChunk + 24) + int64_t(xslots) * (rc.x_slot + 3 * 8 + 3 * 4 + kMaxXRows * 4 + 4) +
           part_bytes + scale_bytes;
  };
  rc.slots = 0;
  for (int s = kMaxSlots; s >= kMinSlots && rc.slots == 0; s--) {
    const int nx = std::min(kMaxXSlots, std::max(2, gpu::ceil_div(s, T) + 1));
    if (bytes(s, nx) <= int64_t(info.smem_per_block_optin)) rc.slots = s, rc.xslots = nx;
  }
  // 32 rows: x slots of 64 KB leave room for 4 ring slots and 2 x slots (e.g. down's 2 tiles a pass would want 3).
  for (int s = kMaxSlots; s >= kMinSlots && rc.slots == 0; s--)
    if (bytes(s, 2) <= int64_t(info.smem_per_block_optin)) rc.slots = s, rc.xslots = 2;
  if (rc.slots == 0) return false;
  const size_t smem = size_t(bytes(rc.slots, rc.xslots));
  RingMaps maps{};  // every condition the driver checks was checked by try_ring: a refusal is an error
  std::string e;
  if (!p.w_tiles) {  // the pre-tiled copy's size was checked against this grid by skinny_gemm_gpu
    e = gpu::ring::encode_weight_tiles(&maps.w, p.w, uint64_t(p.N), uint64_t(row_bytes));
    ANVIL_CHECK(e.empty(), "skinny_gemm", "a tensor map of w", e);
  }
  e = encode_x_map(&maps.x, p, rc);
  ANVIL_CHECK(e.empty(), "skinny_gemm", "a tensor map of x", e);
  auto kernel = skinny_ring_kernel<WT, XBF16, MG>;
  static size_t smem_set = 0;  // per instantiation: the opt-in above 48 KB
  if (smem > smem_set) {
    ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                        gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    smem_set = smem;
  }
  const int threads = kConvX<WT, XBF16, MG> ? kRingThreads : kConsumers + kWarp;  // converters only when needed
  gpu::launch_early(kernel, dim3(unsigned(grid)), dim3(unsigned(threads)), smem, p, rc, maps);
  return true;
}

template <class WT, bool XBF16>
bool launch_ring_rows(const Params& p) {
  if (p.M <= 8) return launch_ring<WT, XBF16, 1>(p);
  if (p.M <= kSkinnyMaxRows) return launch_ring<WT, XBF16, 2>(p);
  if constexpr (kWideRing<WT, XBF16>)
    return p.M <= kThreeGroupRows ? launch_ring<WT, XBF16, 3>(p) : launch_ring<WT, XBF16, 4>(p);
  return false;
}

// ANVIL_SKINNY_RING=0 keeps every product off the ring kernel, =2 sends it every row count (A/B timing).
int ring_mode() {
  static const int mode = [] {
    const char* e = std::getenv("ANVIL_SKINNY_RING");
    return e && *e ? std::atoi(e) : 1;
  }();
  return mode;
}
}  // namespace

int64_t ring_tiles_bytes(const Tensor& w) {
  const auto info = gpu::device_info(gpu::current_device());
  const int64_t N = w.size(0), K = w.size(1);
  if (!ring_reads(info, w.dtype(), K) || N == 0) return 0;
  return ring_layout::pretiled_bytes(int(N), K * dtype_size(w.dtype()), ring_grid(info, int(N)));
}

Tensor ring_tiles(const Tensor& w) {
  const int64_t bytes = ring_tiles_bytes(w);
  if (bytes == 0 || !gpu::aligned16(w.data_ptr())) return Tensor();
  const auto info = gpu::device_info(gpu::current_device());
  Tensor t = Tensor::empty({bytes}, DType::u8, w.device());
  gpu::ring::pretile(w.data_ptr(), int(w.size(0)), w.size(1) * dtype_size(w.dtype()), ring_grid(info, int(w.size(0))),
                     t.data<uint8_t>());
  return t;
}

namespace {
// Whether the ring takes a product of M rows of xd x and an (N, K) weight of wd, alignment aside.
bool ring_takes(int M, int N, int K, DType wd, DType xd) {
  const int mode = ring_mode();
  if (M < 1 || M > kWideRows || N < 1 || mode == 0) return false;
  // Past 16 rows only e4m3fn with f16 x, given or staged (stage_x16: the plain x's threshold, which is the higher).
  if (M > kSkinnyMaxRows && !(wd == DType::e4m3fn && (xd == DType::f16 || (xd == DType::bf16 && stage_x16(M, false)))))
    return false;
  const auto info = gpu::device_info(gpu::current_device());
  if (!ring_reads(info, wd, K)) return false;
  const bool fp8 = wd == DType::e4m3fn || wd == DType::e4m3fnuz;
  // FP8 weights. H200, 8B projections, µs per launch in a graph, ring / register kernels:
  // - e4m3fnuz, and e4m3fn from 9 rows with bf16 x, decode in software (~13 instructions per 4 weights, run
  //   latency-bound): one row q|k|v 12.4 / 12.4, o 10.1 / 7.7, gate|up 45.9 / 40.7, down 27.3 / 24.1; 4 rows 12.7 /
  //   14.5, 10.2 / 10.1, 46.0 / 45.9, 27.4 / 25.5; 16 rows 13.9 / 16.7, 11.0 / 11.9, 50.7 / 53.7, 29.0 / 29.2. So
  //   e4m3fnuz below kRingMinRowsFp8 rows keeps the register kernels.
  // - e4m3fn at 1-8 rows converts in hardware (kHwFp8): one row 10.7 / 12.4, 9.6 / 7.7, 37.5 / 40.7, 22.6 / 24.3;
  //   4 rows 10.9 / 14.6, 9.6 / 10.0, 37.8 / 46.4, 22.7 / 25.8. One row of a weight under kRingMinBytesFp8Row
  //   (o's 16.8 MB) keeps the register kernels, whose fixed cost is lower.
  // docs/decode_kernels.md, ninth and tenth rounds. 16-bit weights take the ring at every row count.
  if (wd == DType::e4m3fnuz && M < kRingMinRowsFp8 && mode != 2) return false;
  if (wd == DType::e4m3fn && M == 1 && int64_t(N) * K < kRingMinBytesFp8Row && mode != 2) return false;
  return (xd == DType::bf16 && (wd == DType::bf16 || fp8)) || (xd == DType::f16 && (wd == DType::f16 || fp8));
}

// A fused prologue (norm or SwiGLU) takes the ring only through its f16 staging: the ring's own x path reads plain x.
bool ring_stages_prologue(int M, int N, int K, DType wd, DType xd) {
  return ring_takes(M, N, K, wd, xd) && wd == DType::e4m3fn && xd == DType::bf16 && stage_x16(M, true) &&
         K <= kStagePrologueMaxK;
}
}  // namespace

bool skinny_fused_stages(int M, int N, int K, DType wd, DType xd) { return ring_stages_prologue(M, N, K, wd, xd); }
bool ring_wide(int M, int N, int K, DType wd, DType xd) {
  return M > kSkinnyMaxRows && ring_takes(M, N, K, wd, xd);
}

bool try_ring(const Params& p, DType wd) {
  if (!ring_takes(p.M, p.N, p.K, wd, p.x_dtype)) return false;
  if (p.pro != kProPlain && !ring_stages_prologue(p.M, p.N, p.K, wd, p.x_dtype)) return false;
  const bool xbf = p.x_dtype == DType::bf16;
  // Tile maps: 16-byte aligned bases (rows of whole lines: ring_reads); the stagings load 16 bytes at a time too.
  auto aligned = [](const void* q) { return !q || gpu::aligned16(q); };
  if (!gpu::aligned16(p.x) || !gpu::aligned16(p.w) || !aligned(p.nb) || !aligned(p.gamma) || !aligned(p.h_out))
    return false;
  if (wd == DType::e4m3fn && xbf && stage_x16(p.M, p.pro != kProPlain)) {
    // The staged copy and its row scales are stream-ordered temporaries: freed here, reused only by later work.
    const Device dev = Device::gpu(gpu::current_device());
    Tensor x16 = Tensor::empty({p.M, p.K}, DType::f16, dev), rs = Tensor::empty({p.M}, DType::f32, dev);
    auto* xo = static_cast<uint32_t*>(x16.data_ptr());
    const auto* x = static_cast<const uint16_t*>(p.x);
    const dim3 grid(unsigned(p.M)), block(kStageThreads);
    if (p.pro == kProPlain)
      gpu::launch_early(stage_x_f16, grid, block, 0, x, p.K, xo, rs.data<float>());
    else if (p.pro == kProSwiglu)
      gpu::launch_early(stage_prologue_f16<true>, grid, block, 0, x, nullptr, nullptr, nullptr, p.K, 0.f, xo,
                        rs.data<float>());
    else
      gpu::launch_early(stage_prologue_f16<false>, grid, block, 0, x, static_cast<const uint16_t*>(p.nb),
                        static_cast<const uint16_t*>(p.gamma), static_cast<uint16_t*>(p.h_out), p.K, p.eps, xo,
                        rs.data<float>());
    Params q = p;
    q.pro = kProPlain, q.nb = q.gamma = nullptr, q.h_out = nullptr;
    q.x = x16.data_ptr(), q.x_dtype = DType::f16, q.y_row_scale = rs.data<float>();
    return launch_ring_rows<WE4m3<false>, false>(q);
  }
  switch (wd) {
    case DType::bf16: return launch_ring_rows<WBf16, true>(p);
    case DType::f16: return launch_ring_rows<WF16, false>(p);
    case DType::e4m3fn: return xbf ? launch_ring_rows<WE4m3<false>, true>(p) : launch_ring_rows<WE4m3<false>, false>(p);
    default: return xbf ? launch_ring_rows<WE4m3<true>, true>(p) : launch_ring_rows<WE4m3<true>, false>(p);
  }
}
#else
// No bulk copies or m16n8k16 MMA in this vendor's header (HIP): the other kernels take every product.
bool try_ring(const Params&, DType) { return false; }
bool skinny_fused_stages(int, int, int, DType, DType) { return false; }
bool ring_wide(int, int, int, DType, DType) { return false; }
int64_t ring_tiles_bytes(const Tensor&) { return 0; }
Tensor ring_tiles(const Tensor&) { return Tensor(); }
#endif

}  // namespace skinny
}  // namespace anvil
