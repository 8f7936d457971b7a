// Shared pieces of the decode_stack kernel (decode_stack.cu), its attention phase (decode_stack_attention.cuh) and
// its FP8 GEMM (decode_stack_tiles.cuh): the block shape, the per-layer table and parameters, the chunk schedule
// and the consumer warps' barriers. The ring itself (tile layout, bounded waits) is backends/gpu/weight_ring.cuh.
// CUDA only (bulk copies): included where ANVIL_HAS_BULK_COPY is set.
#pragma once
#include <cstdint>
#include <cstdio>

#include "backends/gpu/common.cuh"
#include "backends/gpu/weight_ring.cuh"

#ifdef ANVIL_HAS_BULK_COPY
namespace anvil::decode_stack_gpu {
using gpu::ring::kChunk;
using gpu::ring::kTileRows;
using gpu::kWaitCycles;
using gpu::ring::release_slot;
using gpu::ring::tile_offset;
using gpu::ring::wait_chunk;
using gpu::ring::wait_failed;

constexpr int kW = gpu::kWarpSize;
constexpr int kWarps = 12;                        // consumer warps
constexpr int kConsumers = kWarps * kW;
constexpr int kThreads = kConsumers + kW;         // + the producer warp
constexpr int kMaxSlots = 16;
constexpr int kMinSlots = 4;
constexpr int kAttnRows = 64;                     // rows per attention split at least
constexpr int kBarConsumers = 1;                  // hardware barrier id of the consumer warps
constexpr int kBarTileGroup0 = 2;                 // ids 2, 3, 4: the FP8 tile groups (gemm_tiles)
// FP8 weights go to the tensor cores (decode_stack.cu, gemm_tiles): their chunk is a tile of kTileRows rows by
// kTileK columns, one tiled copy through a tensor map that sees a weight (N, K) as (K / 128 blocks, N rows, 128 B)
// with the rows inside the blocks, so the tile lands as [block][row][128 B] under the 128-byte swizzle and the
// rows a quarter-warp reads fall on different banks (tile_offset).
constexpr int kTileK = gpu::ring::kTileBytes;     // 1024 FP8 columns: 8 blocks of 128
constexpr int kTileQuarters = 4;                  // warps per tile, each a quarter of every piece's columns
constexpr int kTileGroups = kWarps / kTileQuarters;
static_assert(kWarps % kTileQuarters == 0, "FP8 tile groups");

struct Layer {
  const uint8_t* w[4];    // q|k|v (QD + 2 KVD, C), o (C, QD), gate|up (2H, C), down (C, H)
  const float* ws[4];     // FP8 scales, or nullptr for 16-bit weights
  int ws_stride[4];       // 1: per row; 0: per tensor
  const bf16* in_norm;
  const bf16* post_norm;
  float in_gmax, post_gmax;  // max |gamma| of each norm (FP8: x's f16 staging scale)
  const void* tmap[4];    // FP8: tensor maps of w[0..3] (tiles of kTileRows x kTileK), or nullptr
  bf16* kc;               // (Tmax, NKV, HD)
  bf16* vc;
};

struct Params {
  const Layer* layers;
  int L, C, NH, NKV, H, QD, KVD, Tmax, slots, x_bytes, max_splits;
  int part_offset, part_floats;  // FP8 tile sums: byte offset in the x region, floats per buffer
  int l2_first;           // weights copied with an L2 evict-first policy (default)
  float eps, scale_log2;  // attention scale * log2(e)
  bf16* h0;
  bf16* h1;
  bf16* branch;
  bf16* qkv;              // (QD + 2 KVD)
  bf16* att;              // (QD)
  bf16* gu;               // (H) silu(gate) * up: down's input
  float* part;            // (NKV, max_splits, G, HD + 2): m, l, acc
  unsigned* counters;     // [0] grid barrier, [1 + g] tickets
  unsigned long long* trace;  // (L, kStamps, grid) globaltimer ns at each phase end, or nullptr
  const float* inv_freq;
  const int32_t* start;
};

// ---- the chunk schedule (producer and consumers compute the same one) ----------------------------------------
struct Mat {
  const uint8_t* w;
  int N, K;          // rows, columns
  const void* tmap;  // FP8: the weight's tensor map, whose rows start at row0 (up: the second half of gate|up)
  int row0;
};
// The five matrices of a layer in stream order: q|k|v, o, gate, up (the two halves of the stacked gate|up weight,
// so a block owns the same rows of both and applies SwiGLU to its own outputs), down.
constexpr int kMats = 5;
template <int ES>
__device__ __forceinline__ Mat mat_of(const Params& p, const Layer& ly, int m) {
  switch (m) {
    case 0: return {ly.w[0], p.QD + 2 * p.KVD, p.C, ly.tmap[0], 0};
    case 1: return {ly.w[1], p.C, p.QD, ly.tmap[1], 0};
    case 2: return {ly.w[2], p.H, p.C, ly.tmap[2], 0};
    case 3: return {ly.w[2] + int64_t(p.H) * p.C * ES, p.H, p.C, ly.tmap[2], p.H};
    default: return {ly.w[3], p.C, p.H, ly.tmap[3], 0};
  }
}
// The block's rows [r0, r1) of a matrix, cut into units of rpc whole rows (a row fits a chunk) or of one row in
// ppr pieces of pe elements (it does not: down's 14336-wide bf16 rows are two 14 KB pieces).
struct Plan {
  int r0, r1, rpc, ppr, pe, units;
};
// FP8 (ES = 1): units of kTileRows rows, each row in ppr pieces of kTileK columns (the last one shorter), one tile
// chunk per piece.
template <int ES>
__device__ __forceinline__ Plan plan_of(const Mat& m) {
  Plan pl;
  pl.r0 = int(int64_t(m.N) * blockIdx.x / gridDim.x);
  pl.r1 = int(int64_t(m.N) * (blockIdx.x + 1) / gridDim.x);
  const int row_bytes = m.K * ES;
  if constexpr (ES == 1) {
    pl.rpc = kTileRows, pl.pe = kTileK;
    pl.ppr = (m.K + kTileK - 1) / kTileK;
    pl.units = (pl.r1 - pl.r0 + kTileRows - 1) / kTileRows;
  } else if (row_bytes <= kChunk) {
    pl.rpc = kChunk / row_bytes, pl.ppr = 1, pl.pe = m.K;
    pl.units = (pl.r1 - pl.r0 + pl.rpc - 1) / pl.rpc;
  } else {
    constexpr int align = 16 / ES;  // a piece is whole 16-byte packs
    const int ppr0 = (row_bytes + kChunk - 1) / kChunk;
    pl.rpc = 1;
    pl.pe = ((m.K + ppr0 - 1) / ppr0 + align - 1) / align * align;
    pl.ppr = (m.K + pl.pe - 1) / pl.pe;
    pl.units = pl.r1 - pl.r0;
  }
  return pl;
}

// ---- consumer helpers --------------------------------------------------------------------------------------
__device__ __forceinline__ void consumer_sync() { anvil_bar_sync(kBarConsumers, kConsumers); }

__device__ __forceinline__ float consumer_sum(float v, float* red) {
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW;
  v = gpu::warp_sum(v);
  if (lane == 0) red[warp] = v;
  consumer_sync();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; w++) t += red[w];
  consumer_sync();  // red is reused by the next call
  return t;
}

// Block-wide sum of v and max of m (the consumer warps), one barrier pair for both.
__device__ __forceinline__ void consumer_sum_max(float& v, float& m, float* red) {
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW;
  v = gpu::warp_sum(v), m = gpu::warp_max(m);
  if (lane == 0) red[warp] = v, red[kWarps + warp] = m;
  consumer_sync();
  v = 0.f, m = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; w++) v += red[w], m = fmaxf(m, red[kWarps + w]);
  consumer_sync();
}

// Every block arrives, then waits for all: the phase's global writes are visible after it. Thread 0 arrives with
// a release add (the block's writes before the consumer barrier are ordered before it) and polls with acquire
// loads, backing off 32 ns between polls. H200, 8B shape, batch 1, against a full fence + atomicAdd + a fence
// after the polls (cooperative groups' pattern): bf16 4.303 -> 4.260 ms/token (4.274 without the backoff), FP8
// 3.046 -> 3.017; barriers 2, 4 and 5 now release ~0.95 µs after the last block arrives (was ~1.2).
// `arrived` (traces only) gets the time the block's last warp reached the barrier.
__device__ __forceinline__ void grid_sync(unsigned* counter, unsigned& passed, unsigned long long* arrived = nullptr) {
  consumer_sync();
  passed++;
  if (threadIdx.x == 0) {
    if (arrived) *arrived = anvil_globaltimer_ns();
    anvil_red_add_release_gpu(counter, 1u);
    const unsigned target = passed * gridDim.x;
    const long long t0 = clock64();
    while (anvil_load_acquire_gpu(counter) < target) {
      __nanosleep(32);
      if (clock64() - t0 > kWaitCycles) wait_failed("the grid barrier", passed, anvil_load_acquire_gpu(counter));
    }
  }
  consumer_sync();
}

__device__ __forceinline__ float lo_f32(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f32(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

}  // namespace anvil::decode_stack_gpu

#endif  // ANVIL_HAS_BULK_COPY
