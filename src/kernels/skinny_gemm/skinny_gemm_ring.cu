// GPU skinny GEMM, ring path: y (M, N) = x (M, K) @ w^T for 1..16 rows of 16-bit x on CUDA sm_90+, the weights
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
//   of 1024 bytes (512 bf16 or 1024 fp8 columns). A chunk = (tile, piece) = one 16 KB tiled copy.
// - x comes through the copy engine too: per piece, one tiled copy of that piece's columns for XR rows (the
//   power of two >= M; rows past M arrive as zeros) into one of two x slots. So the consumers read no global
//   memory at all: a load from L2 would queue behind the bulk data already headed to the SM (~0.4 µs per 16 KB
//   chunk in flight; docs/decode_kernels.md, fifth round) and stall the warp that issued it.
// - Passes of at most 12 tiles, piece-major inside a pass: x's piece i is copied once per pass and serves every
//   tile's piece i. The 12 warps are 3 groups of 4; group G takes the pass's tiles G, G + 3, G + 6, G + 9 and
//   keeps their sums in registers over the pieces; warp s of a group takes a quarter (256 bytes) of every piece.
// - Products on the tensor cores (m16n8k16, f32 sums), fragments as in skinny_gemm_mma.cu: A = 16 weight rows
//   (fp8 decoded exactly into the 16-bit type), B = x^T, one MMA per 8 activation rows (MG = 1 or 2).
// - At the end of a pass, in up to 4 rounds, the warps put their sums in `part` and the consumer threads add the
//   4 quarters in a fixed order, scale, and store y: deterministic, no atomics.
// - Launched early (gpu::launch_early): the first chunks of weights, which depend on nothing, are in flight
//   before the previous kernel has finished; x and y wait for it.
#include <algorithm>
#include <cstdlib>

#include "kernels/skinny_gemm/skinny_gemm_gpu.cuh"  // first: common.cuh brings the vendor runtime core/ needs
#include "backends/gpu/weight_ring.cuh"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil {
namespace skinny {

#if defined(ANVIL_HAS_BULK_COPY) && defined(ANVIL_HAS_MMA16816)
namespace {
using gpu::ring::kChunk;
using gpu::ring::kTileBytes;
using gpu::ring::kTileRows;

constexpr int kRingWarps = 12;                       // consumer warps
constexpr int kConsumers = kRingWarps * kWarp;
constexpr int kRingThreads = kConsumers + kWarp;     // + the producer warp
constexpr int kQuarters = 4;                         // warps per tile
constexpr int kGroups = kRingWarps / kQuarters;      // tiles in work at once
constexpr int kPassTiles = 12;                       // tiles per pass at most
constexpr int kPerGroup = kPassTiles / kGroups;      // a warp's tiles per pass, their sums in registers
constexpr int kMaxSlots = 12;                        // 192 KB of weights in flight per SM
constexpr int kMinSlots = 4;
constexpr int kMaxXSlots = 16;
constexpr int kRingMinRowsFp8 = 9;                   // see try_ring
constexpr int kBarConsumers = 1;                     // hardware barrier id of the consumer warps
static_assert(kRingWarps % kQuarters == 0 && kPassTiles % kGroups == 0, "ring work split");
static_assert(kWarp == kAnvilMmaLanes, "the m16n8k16 fragment layout is defined over 32 lanes");

struct RingCfg {
  int slots;    // ring slots of kChunk bytes
  int xr;       // x rows per x slot: a power of two >= M, at most 16
  int x_lines;  // 128-byte lines of one x row per piece (16-bit x: 2 bytes per weight column)
  int x_slot;   // bytes per x slot: 128 * xr * x_lines
  int xslots;   // x slots: enough pieces ahead for the ring to stay full when a pass has few tiles
  int ppr;      // pieces per weight row
};
struct RingMaps {
  CUtensorMap w;  // gpu::ring::encode_weight_tiles
  CUtensorMap x;  // (64 elements, M rows, K / 64 lines), box (64, xr, x_lines), 128-byte swizzled
};

// The block's tiles [ua, ub) of pass q: full passes of kPassTiles, then the rest. Full passes keep the 3 groups
// even (4 tiles each); equal passes (14 tiles as 7 + 7) gave one group 3 tiles of every 7.
struct Pass {
  int ua, ub;
};
__device__ __forceinline__ Pass pass_of(int units, int q) {
  return {q * kPassTiles, min(units, (q + 1) * kPassTiles)};
}

__device__ void ring_produce(const RingCfg& rc, const RingMaps& maps, int r0, int units, int passes, uint8_t* ring,
                             uint8_t* xs, uint64_t* full, uint64_t* empty, volatile unsigned* issued,
                             uint64_t* xfull, uint64_t* xempty, volatile unsigned* xissued) {
  const uint64_t policy = anvil_l2_evict_first();  // weights are read once: x and y stay in L2
  unsigned c = 0, xc = 0;
  auto copy_w = [&](int tile, int piece) {
    const unsigned slot = c % unsigned(rc.slots), use = c / unsigned(rc.slots);
    gpu::ring::claim_slot(full, empty, slot, use, kChunk, c);
    anvil_tile_copy_g2s_3d(ring + size_t(slot) * kChunk, &maps.w, 0, r0 + tile * kTileRows,
                           piece * (kTileBytes / 128), &full[slot], policy);
    issued[slot] = use;
    c++;
  };
  // The first chunks of piece 0 (as many as the ring holds) depend on nothing the previous kernel writes.
  const Pass p0 = pass_of(units, 0);
  const int pre = min(p0.ub - p0.ua, rc.slots);
  for (int u = 0; u < pre; u++) copy_w(u, 0);
  anvil_wait_prior_grid();
  for (int q = 0; q < passes; q++) {
    const Pass ps = pass_of(units, q);
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

// The 16 bytes of x row `row` at byte o of the piece, in an x slot laid out as [line][row][128 B], 128-byte
// swizzled: line L = (o / 128) * xr + row, its 16-byte chunk (o / 16) % 8 at ((o / 16) % 8) ^ (L % 8).
__device__ __forceinline__ uint4 x_load(const uint8_t* xsl, int xr, int row, int o) {
  const int L = (o >> 7) * xr + row;
  return *reinterpret_cast<const uint4*>(xsl + (L << 7) + ((((o >> 4) & 7) ^ (L & 7)) << 4));
}

template <class WT, bool XBF16, int MG>
__global__ void __launch_bounds__(kRingThreads, 1)
    skinny_ring_kernel(const Params p, const RingCfg rc, const __grid_constant__ RingMaps maps) {
  constexpr int Q = 16 / WT::kBytes / 4;      // MMAs per 16 weight bytes and x row group: 2 (bf16/f16), 4 (fp8)
  constexpr int XW = 16 / WT::kBytes / 2;     // x words (16-bit pairs) per 16 weight bytes: 4 or 8
  // Independent MMA chains per tile: a chunk is 16 (fp8) or 8 (bf16) dependent MMAs per warp in one chain; two
  // halve that latency. At MG = 2 the second chain's 32 registers would spill.
  constexpr int CH = MG == 1 ? 2 : 1;
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
      anvil_mbar_init(&xfull[s], 1), anvil_mbar_init(&xempty[s], 1);
      xissued[s] = ~0u, xdone[s] = 0;
    }
    anvil_mbar_init_fence();
  }
  __syncthreads();

  const int r0 = int(int64_t(p.N) * blockIdx.x / gridDim.x), r1 = int(int64_t(p.N) * (blockIdx.x + 1) / gridDim.x);
  const int units = (r1 - r0 + kTileRows - 1) / kTileRows;
  const int passes = (units + kPassTiles - 1) / kPassTiles;
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers)
      ring_produce(rc, maps, r0, units, passes, ring, xs, full, empty, issued, xfull, xempty, xissued);
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
  unsigned c = 0, xc = 0;
  for (int q = 0; q < passes; q++) {
    const Pass ps = pass_of(units, q);
    const int T = ps.ub - ps.ua;
    const int mine = T > grp ? (T - grp + kGroups - 1) / kGroups : 0;  // this group's tiles in the pass
    const unsigned xreaders = unsigned(kQuarters * min(T, kGroups));
    float acc[kPerGroup][MG][CH][4];
    uint32_t nan[kPerGroup][2];
#pragma unroll
    for (int j = 0; j < kPerGroup; j++) {
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
      gpu::ring::wait_chunk(xissued, xfull, xslot, xc / unsigned(rc.xslots), xc);
      const uint8_t* xsl = xs + size_t(xslot) * rc.x_slot;
      const int valid = min(kTileBytes, row_bytes - i * kTileBytes);  // bytes of the rows in this piece
#pragma unroll
      for (int j = 0; j < kPerGroup; j++) {
        if (j >= mine) break;
        const unsigned cc = c + unsigned(i * T + grp + j * kGroups), slot = cc % unsigned(rc.slots);
        gpu::ring::wait_chunk(issued, full, slot, cc / unsigned(rc.slots), cc);
        const uint8_t* wr = ring + size_t(slot) * kChunk;
#pragma unroll
        for (int st = 0; st < kTileBytes / kQuarters / 64; st++) {
          const int kb = s * (kTileBytes / kQuarters) + 64 * st;  // warp-uniform: the MMAs need every lane
          if (kb >= valid) break;
          const int k = kb + 16 * t;
          const uint4 lo = *reinterpret_cast<const uint4*>(wr + gpu::ring::tile_offset(pr, k));
          const uint4 hi = *reinterpret_cast<const uint4*>(wr + gpu::ring::tile_offset(pr + 8, k));
          const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
          uint32_t xv[MG][XW];
#pragma unroll
          for (int mg = 0; mg < MG; mg++) {
            const int xrow = min(mg * 8 + g, rc.xr - 1);  // rows past xr feed only outputs that are not stored
#pragma unroll
            for (int h = 0; h < XW / 4; h++) {
              const uint4 v = x_load(xsl, rc.xr, xrow, k * (2 / WT::kBytes) + 16 * h);
              xv[mg][4 * h] = v.x, xv[mg][4 * h + 1] = v.y, xv[mg][4 * h + 2] = v.z, xv[mg][4 * h + 3] = v.w;
            }
          }
#pragma unroll
          for (int qq = 0; qq < Q; qq++) {
            uint32_t a[4];
            mma_quad<WT, XBF16>(wl, qq, a[0], a[2], nan[j][0]);
            mma_quad<WT, XBF16>(wh, qq, a[1], a[3], nan[j][1]);
#pragma unroll
            for (int mg = 0; mg < MG; mg++) {
              const uint32_t b[2] = {xv[mg][2 * qq], xv[mg][2 * qq + 1]};
              anvil_mma16816<XBF16>(acc[j][mg][qq % CH], a, b);
            }
          }
        }
        gpu::ring::release_slot(done, empty, slot, kQuarters);
      }
      gpu::ring::release_slot(xdone, xempty, xslot, xreaders);
    }
    if (q + 1 == passes) anvil_allow_next_grid();

    // The pass's sums: round j brings tiles 3j .. 3j + 2 (one per group) through `part`.
    const int rounds = (T + kGroups - 1) / kGroups;
#pragma unroll
    for (int j = 0; j < kPerGroup; j++) {
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
                nan[j][i >> 1] ? bits_f32(0x7fc00000u) : (CH == 2 ? acc[j][mg][0][i] + acc[j][mg][1][i] : acc[j][mg][0][i]);
      }
      anvil_bar_sync(kBarConsumers, kConsumers);
      for (int o = int(threadIdx.x); o < kGroups * kTileRows * p.M; o += kConsumers) {
        const int G = o / (kTileRows * p.M), r = o / p.M % kTileRows, m = o % p.M;
        const int u = G + j * kGroups, n = r0 + (ps.ua + u) * kTileRows + r;
        if (u >= T || n >= r1) continue;
        // Inverse of the fragment map: tile row r = pr(g) + 8 (i / 2), activation row m = 8 mg + 2 t + i % 2.
        const int rr = r & 7, gg = ((rr & 3) << 1) | (rr >> 2), tt = (m & 7) >> 1;
        const int v = (m >> 3) * 4 + (r >> 3) * 2 + (m & 1), ln = gg * 4 + tt;
        float sum = 0.f;
#pragma unroll
        for (int sq = 0; sq < kQuarters; sq++) sum += part[((G * kQuarters + sq) * MG * 4 + v) * kWarp + ln];
        store_y(p, int64_t(m) * p.N + n, sum * out_scale(p, n));
      }
      anvil_bar_sync(kBarConsumers, kConsumers);  // part is rewritten by the next round
    }
    c += unsigned(T * rc.ppr);
  }
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
  rc.x_lines = kTileBytes / WT::kBytes * 2 / 128;
  rc.x_slot = 128 * rc.xr * rc.x_lines;
  // Shared memory: the ring, the x slots, the sums, and per slot (of either) two barriers and two counters. The
  // producer issues x's piece before that piece's chunks and waits for a free x slot, so the ring stays full only
  // if the x slots reach as many pieces ahead as the ring holds chunks: slots / T + 1 of them for T tiles a pass.
  // The most ring slots for which those fit.
  const int grid = std::min(info.compute_units, gpu::ceil_div(p.N, kTileRows));
  const int T = std::min(kPassTiles, gpu::ceil_div(gpu::ceil_div(p.N, grid), kTileRows));
  const int64_t part_bytes = int64_t(kRingWarps) * MG * 4 * kWarp * 4;
  auto bytes = [&](int slots, int xslots) {
    return int64_t(slots) * (kChunk + 24) + int64_t(xslots) * (rc.x_slot + 24) + part_bytes;
  };
  rc.slots = 0;
  for (int s = kMaxSlots; s >= kMinSlots && rc.slots == 0; s--) {
    const int nx = std::min(kMaxXSlots, std::max(2, gpu::ceil_div(s, T) + 1));
    if (bytes(s, nx) <= int64_t(info.smem_per_block_optin)) rc.slots = s, rc.xslots = nx;
  }
  if (rc.slots == 0) return false;
  const size_t smem = size_t(bytes(rc.slots, rc.xslots));
  RingMaps maps;  // every condition the driver checks was checked by try_ring: a refusal is an error
  std::string e = gpu::ring::encode_weight_tiles(&maps.w, p.w, uint64_t(p.N), uint64_t(row_bytes));
  ANVIL_CHECK(e.empty(), "skinny_gemm", "a tensor map of w", e);
  e = encode_x_map(&maps.x, p, rc);
  ANVIL_CHECK(e.empty(), "skinny_gemm", "a tensor map of x", e);
  auto kernel = skinny_ring_kernel<WT, XBF16, MG>;
  static size_t smem_set = 0;  // per instantiation: the opt-in above 48 KB
  if (smem > smem_set) {
    ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                        gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    smem_set = smem;
  }
  gpu::launch_early(kernel, dim3(unsigned(grid)), dim3(kRingThreads), smem, p, rc, maps);
  return true;
}

template <class WT, bool XBF16>
bool launch_ring_rows(const Params& p) {
  return p.M <= 8 ? launch_ring<WT, XBF16, 1>(p) : launch_ring<WT, XBF16, 2>(p);
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

bool try_ring(const Params& p, DType wd) {
  const int mode = ring_mode();
  if (p.pro != kProPlain || p.M < 1 || p.M > 16 || p.N < 1 || mode == 0) return false;
  const auto info = gpu::device_info(gpu::current_device());
  if (!info.bulk_copy || !info.bf16_compute) return false;
  const bool fp8 = wd == DType::e4m3fn || wd == DType::e4m3fnuz;
  // FP8 weights below kRingMinRowsFp8 rows keep the register kernels. H200, 8B projections, µs per launch in a
  // graph, ring / register kernels: one row q|k|v 12.4 / 12.4, o 10.1 / 7.7, gate|up 45.9 / 40.7, down 27.3 / 24.1;
  // 4 rows 12.7 / 14.5, 10.2 / 10.1, 46.0 / 45.9, 27.4 / 25.5; 16 rows 13.9 / 16.7, 11.0 / 11.9, 50.7 / 53.7,
  // 29.0 / 29.2; FP8 decode at batch 8 3.88 / 3.77 ms per step. The ring's FP8 consumer decodes e4m3 to bf16 in
  // software (~13 instructions per 4 weights) and runs latency-bound at ~1.3 issued instructions per clock per SM
  // (docs/decode_kernels.md, ninth round). 16-bit weights take it at every row count.
  if (fp8 && p.M < kRingMinRowsFp8 && mode != 2) return false;
  const bool xbf = p.x_dtype == DType::bf16;
  if (!(xbf && (wd == DType::bf16 || fp8)) && !(p.x_dtype == DType::f16 && (wd == DType::f16 || fp8))) return false;
  // Tile maps: 16-byte aligned bases, weight rows a multiple of 128 bytes (whole lines), x rows of whole lines.
  const int64_t row_bytes = int64_t(p.K) * dtype_size(wd);
  if (row_bytes % 128 != 0 || p.K % 64 != 0 || !gpu::aligned16(p.x) || !gpu::aligned16(p.w)) return false;
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
#endif

}  // namespace skinny
}  // namespace anvil
