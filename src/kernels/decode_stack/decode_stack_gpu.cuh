// Shared pieces of the decode_stack kernel (decode_stack.cu), its attention phase (decode_stack_attention.cuh) and
// its FP8 GEMM (decode_stack_tiles.cuh): the block shape, the per-layer table and parameters, the chunk schedule,
// the layout of the pre-tiled FP8 weights (decode_stack_pretile.cu) and the consumer warps' barriers. The ring
// itself (tile layout, bounded waits) is backends/gpu/weight_ring.cuh.
// CUDA only (bulk copies): included where ANVIL_HAS_BULK_COPY is set.
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backends/gpu/common.cuh"
#include "backends/gpu/weight_ring.cuh"
#include "kernels/decode_stack/decode_stack.h"
#include "kernels/decode_stack/decode_stack_tags.h"

#ifdef ANVIL_HAS_BULK_COPY
namespace anvil::decode_stack_gpu {
using gpu::ring::kChunk;
using gpu::ring::kTileRows;
using gpu::kWaitCycles;
using gpu::ring::release_slot;
using gpu::ring::tile_offset;
using gpu::ring::wait_chunk;
using gpu::ring::wait_failed;
using ring_layout::pretiled_chunk;
using ring_layout::share_start;
using ring_layout::tiles_per_block;

constexpr int kW = gpu::kWarpSize;
constexpr int kWarps = 12;                        // consumer warps
constexpr int kConsumers = kWarps * kW;
constexpr int kThreads = kConsumers + kW;         // + the producer warp
constexpr int kMaxSlots = 16;
constexpr int kMinSlots = 4;
// Rows per attention split at least (the default of Params::attn_rows). Fewer splits spare short contexts the
// combine's round trips (a ticket and the partials, through L2 under the weight stream). H200, FP8 8B shape, batch
// 1, 128 tokens, 64 / 128 / 256 / 512 rows, two runs each: loop 2.337, 2.339 / 2.325, 2.324 / 2.324, 2.326 / 2.326,
// 2.326 ms/token, synchronised steps 2.382, 2.380 / 2.319, 2.325 / 2.334, 2.313 / 2.325, 2.322; at 2048 tokens of
// context 2.705 / 2.703 / 2.863 (256 rows halve the splits there: one block reads twice the cache).
constexpr int kAttnRows = 128;
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
  const uint8_t* tiled[5];  // FP8: the stream's five matrices (mat_of) pre-tiled (pretiled_chunk), or nullptr
  bf16* kc;               // (Tmax, NKV, HD)
  bf16* vc;
};

struct Params {
  const Layer* layers;
  int L, C, NH, NKV, H, QD, KVD, Tmax, slots, x_bytes, max_splits;
  int attn_rows;          // rows per attention split at least (the splits: decode_stack_attention.cuh)
  int head_split;         // one split: a block per q-head, not per kv-head (attn_split)
  int part_offset, part_floats;  // FP8 tile sums: byte offset in the x region, floats per buffer
  int l2_first;           // weights copied with an L2 evict-first policy (default)
  int hold;               // chunks of a matrix after a hand-off issued before the producer's hold (hold_seq)
  int pace;               // FP8: SM cycles at least between two of the producer's copies (0: as fast as it goes)
  int pace_held;          // FP8: the same for the chunks a matrix issues before the producer's hold
  float eps, scale_log2;  // attention scale * log2(e)
  bf16* h0;
  bf16* h1;
  bf16* branch;           // the last layer's down output, plain bf16 (the host adds it to h)
  // The hand-offs between phases, as tagged words (below): q|k|v (QD + 2 KVD), the attention output (QD), down's
  // input (H), and o's and the other layers' down output (C).
  uint32_t* qkv;
  uint32_t* att;
  uint32_t* gu;
  uint32_t* tb;
  bf16* hp;               // (grid, C): each block's own copy of the residual stream
  float* part;            // (NKV, max_splits, G, HD + 2): m, l, acc
  unsigned* counters;     // [0] blocks done, [1 + g] attention tickets, [1 + NKV] launch generation,
                          // [1 + NKV + k] the blocks that wrote hand-off k (k = 1 .. kCounts) in this launch
  unsigned long long* trace;  // (L, kStamps, grid) globaltimer ns at each phase end, or nullptr
  const float* inv_freq;
  const int32_t* start;
};

// ---- hand-offs: tagged words and arrival counts ---------------------------------------------------------------
// Every activation one phase writes and a later phase of other blocks reads travels as 32-bit words: the bf16 in
// the low half and a 16-bit tag in the high half that names the write (launch, layer, which hand-off). A 32-bit
// store is single-copy atomic, so a reader that has a word with the tag it expects has the value, with no fence.
// Why: the grid barriers these replace cost a chain of round trips to L2 that queued behind the weight ring's ~25
// MB of bulk copies (the release waited for the block's stores to complete, then the arrival, the polls' answer
// and the data): barriers 1 and 3 released 4.7 and 5.4 µs after the last block arrived (docs/decode_kernels.md).
// - The attention blocks poll the q|k|v words they need directly (a few KB each, 8 blocks at the 8B shape).
// - Every block needs all of the other hand-offs (16-57 KB): polling those words from 132 blocks at once flooded
//   L2 (a round of polls is the whole vector per block and round trip), and the GEMM phases next to it slowed by
//   2-3 µs a layer. So the writers of hand-off k count themselves in counters[1 + NKV + k] with a relaxed add
//   (no wait for their stores), one thread per block polls that count, and then the block reads the words once,
//   re-reading only those whose tag is not there yet (a store the count overtook).
// Reuse needs no barrier: a block writes hand-off k + 1 only after reading all of hand-off k, which every block
// wrote after reading all of hand-off k - 1, so nobody still reads a word its next write replaces.
// Tags: decode_stack_tags.h.
using decode_stack_tags::kHandoffs;
using decode_stack_tags::next_tag;
using decode_stack_tags::tag_of;
constexpr int kCounts = kHandoffs - 1;  // counted hand-offs: all but q|k|v
__device__ __forceinline__ uint32_t tagged(uint32_t tag, bf16 v) { return (tag << 16) | v.bits; }
__device__ __forceinline__ bool has_tag(uint4 v, uint32_t tag) {
  return (v.x >> 16) == tag && (v.y >> 16) == tag && (v.z >> 16) == tag && (v.w >> 16) == tag;
}
// Four tagged words' values as two bf16 pairs.
__device__ __forceinline__ uint2 untag4(uint4 v) {
  return make_uint2((v.x & 0xffffu) | (v.y << 16), (v.z & 0xffffu) | (v.w << 16));
}
static __device__ __noinline__ void tag_wait_failed(uint32_t tag, uint32_t word) {
  wait_failed("a tagged activation (tag, word)", tag, word);
}
// Polling: a thread issues the loads of all the words it needs, then re-issues every load whose tag is not yet the
// expected one, all at once, until none is left. Polling its words one after another instead cost a round trip
// to L2 per word once the first was late (their first loads had gone stale): H200, 8B shape, the input norm then
// took ~9 µs a layer against ~5 for the grid barrier and the norm it replaced.
// U packs of 8 values at p + 8 q (q = q0, q0 + step, ... below n packs), handed to use(q, pack) once all carry
// `tag`.
template <int U, class Use>
__device__ __forceinline__ void tagged_packs(const uint32_t* p, int q0, int step, int n, uint32_t tag, Use use) {
  uint4 w[2 * U];
#pragma unroll
  for (int i = 0; i < 2 * U; i++)
    if (q0 + (i / 2) * step < n) w[i] = anvil_load16_relaxed_gpu(p + 8 * (q0 + (i / 2) * step) + 4 * (i % 2));
  const long long t0 = clock64();
  for (;;) {
    bool all = true;
#pragma unroll
    for (int i = 0; i < 2 * U; i++)
      if (q0 + (i / 2) * step < n && !has_tag(w[i], tag)) all = false;
    if (all) break;
    __nanosleep(32);
#pragma unroll
    for (int i = 0; i < 2 * U; i++)
      if (q0 + (i / 2) * step < n && !has_tag(w[i], tag))
        w[i] = anvil_load16_relaxed_gpu(p + 8 * (q0 + (i / 2) * step) + 4 * (i % 2));
    if (clock64() - t0 > kWaitCycles) tag_wait_failed(tag, w[0].x);
  }
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int q = q0 + u * step;
    if (q >= n) break;
    const uint2 a = untag4(w[2 * u]), b = untag4(w[2 * u + 1]);
    use(q, make_uint4(a.x, a.y, b.x, b.y));
  }
}
// N single words at p[i] (ok[i] false: not needed), as bf16 once they carry `tag`.
template <int N>
__device__ __forceinline__ void tagged_words(const uint32_t* const (&p)[N], const bool (&ok)[N], uint32_t tag,
                                             bf16 (&out)[N]) {
  uint32_t w[N];
#pragma unroll
  for (int i = 0; i < N; i++) w[i] = ok[i] ? anvil_load_relaxed_gpu(p[i]) : (tag << 16);
  const long long t0 = clock64();
  for (;;) {
    bool all = true;
#pragma unroll
    for (int i = 0; i < N; i++) all = all && (w[i] >> 16) == tag;
    if (all) break;
    __nanosleep(32);
#pragma unroll
    for (int i = 0; i < N; i++)
      if ((w[i] >> 16) != tag) w[i] = anvil_load_relaxed_gpu(p[i]);
    if (clock64() - t0 > kWaitCycles) tag_wait_failed(tag, w[0]);
  }
#pragma unroll
  for (int i = 0; i < N; i++) out[i].bits = uint16_t(w[i] & 0xffffu);
}

// Where a GEMM (or SwiGLU, or the attention) puts output row r: tagged words for other blocks (TAG), or plain bf16
// (gate's and up's outputs in shared memory, at r - y0; the last layer's down output, which the host reads). The
// kind is a template parameter and the struct a pointer and a tag, no more registers than the plain pointer and
// offset it replaced: it is live through the GEMM loops, which sit at the 128-register cap.
template <bool TAG>
struct Out {
  void* y;
  uint32_t tag;
  __device__ __forceinline__ void put(int r, float v) const {
    const bf16 b = from_f32<bf16>(v);
    if constexpr (TAG) anvil_store_relaxed_gpu(static_cast<uint32_t*>(y) + r, tagged(tag, b));
    else static_cast<bf16*>(y)[r] = b;
  }
};
__device__ __forceinline__ Out<true> out_tagged(uint32_t* tw, uint32_t tag) { return {tw, tag}; }
__device__ __forceinline__ Out<false> out_plain(bf16* y, int y0) { return {y - y0, 0}; }

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
static_assert(sizeof(Layer::tiled) / sizeof(Layer::tiled[0]) == kMats, "a pre-tiled copy per matrix of the stream");
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
// How a matrix of K columns is cut: units of rpc whole rows (a row fits a chunk) or of one row in ppr pieces of pe
// elements (it does not: down's 14336-wide bf16 rows are two 14 KB pieces); FP8 (ES = 1): units of kTileRows rows,
// each row in ppr pieces of kTileK columns (the last one shorter), one tile chunk per piece.
struct Cut {
  int rpc, ppr, pe;
};
template <int ES>
ANVIL_HD Cut cut_of(int K) {
  const int row_bytes = K * ES;
  if constexpr (ES == 1) {
    return {kTileRows, ring_layout::pieces_per_row(K), kTileK};
  } else if (row_bytes <= kChunk) {
    return {kChunk / row_bytes, 1, K};
  } else {
    constexpr int align = 16 / ES;  // a piece is whole 16-byte packs
    const int ppr0 = (row_bytes + kChunk - 1) / kChunk;
    const int pe = ((K + ppr0 - 1) / ppr0 + align - 1) / align * align;
    return {1, (K + pe - 1) / pe, pe};
  }
}
// The block's rows [r0, r1) of a matrix, in `units` units of cut_of's.
struct Plan {
  int r0, r1, rpc, ppr, pe, units;
};
template <int ES>
__device__ __forceinline__ Plan plan_of(const Mat& m) {
  const Cut c = cut_of<ES>(m.K);
  Plan pl;
  pl.r0 = share_start(m.N, int(blockIdx.x), int(gridDim.x));
  pl.r1 = share_start(m.N, int(blockIdx.x) + 1, int(gridDim.x));
  pl.rpc = c.rpc, pl.ppr = c.ppr, pl.pe = c.pe;
  pl.units = (pl.r1 - pl.r0 + pl.rpc - 1) / pl.rpc;
  return pl;
}
// The grid (at most `sms` blocks, at least NKV) whose blocks read the fewest chunks of the stream's matrices in all
// without a longer share for any block (ring_layout::fit_grid), for weights of ES bytes. decode_stack_pretile.cu.
int fit_stack_grid(const DecodeStackShape& s, int ES, int sms);

// ---- FP8 weights pre-tiled (decode_stack_pretile.cu) ----------------------------------------------------------
// Every matrix of the stream (mat_of's five: gate and up apart) as gpu::ring::pretile lays it out for this grid, so
// the producer moves each FP8 chunk with one linear bulk copy (why: weight_ring.cuh).
// Bytes of the pre-tiled copy of one layer's five matrices; and host[l].tiled pointed at layer l's in `out`, with
// the copy written there when `write` (launches on the current stream).
int64_t pretiled_layer_bytes(const DecodeStackShape& s, int grid);
void pretile_weights(const DecodeStackShape& s, int grid, std::vector<Layer>& host, uint8_t* out, bool write);

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

// The block has written its part of hand-off k (its warps are past their stores): counted with a relaxed add.
__device__ __forceinline__ void handoff_arrive(const Params& p, int k) {
  consumer_sync();
  if (threadIdx.x == 0) anvil_red_add_relaxed_gpu(p.counters + 1 + p.NKV + k, 1u);
}
// Until `target` blocks have written hand-off k (one thread polls, backing off 32 ns), then the block goes on to
// read the words.
__device__ __forceinline__ void handoff_wait(const Params& p, int k, unsigned target) {
  if (threadIdx.x == 0) {
    const unsigned* n = p.counters + 1 + p.NKV + k;
    const long long t0 = clock64();
    while (anvil_load_relaxed_gpu(n) < target) {
      __nanosleep(32);
      if (clock64() - t0 > kWaitCycles) wait_failed("a hand-off's writers (hand-off, count)", k, *n);
    }
  }
  consumer_sync();
}

// ---- the producer's hold ---------------------------------------------------------------------------------------
// A small read waits behind the bulk copies already headed for its SM, ~0.4 µs per 16 KB chunk in flight (the fifth
// round, docs/decode_kernels.md). A hand-off's reads are made as the GEMM before it ends, when the producer has just
// refilled the ring with the next matrix's first chunks, so they waited behind a full ring (~5 µs) and the next GEMM
// began with the ring full and none of its later chunks requested. So the producer issues only the first p.hold
// chunks of a matrix that follows a hand-off, then waits until the block has staged that hand-off's input: the reads
// go ahead of the rest, and the rest arrive while the staging and the GEMM's first chunks run. H200, 8B shape, 12
// slots: holds of 6-8 chunks measured alike and best, bf16 4.096 -> 3.93 ms/token, FP8 2.89 -> 2.785 (fifteenth
// round). The holds are numbered by hold_seq (decode_stack_tags.h). Using the wait to prefetch the chunks after
// the hold into L2 (no data to the SM) measured slower, FP8 2.58 -> 2.66-2.73 ms/token: the hand-off's reads slow
// down under any HBM traffic, and per-hand-off holds other than 8 did no better (seventeenth round).
using decode_stack_tags::hold_seq;
// The consumers' side: the block has staged the input of hand-off `seq` (thread 0, after the consumers' barrier).
__device__ __forceinline__ void hold_open(volatile unsigned* opened, unsigned seq) {
  if (threadIdx.x == 0) *opened = seq;
}
// The producer's side: until hand-off `seq` is staged.
__device__ __forceinline__ void hold_wait(volatile unsigned* opened, unsigned seq) {
  const long long t0 = clock64();
  while (*opened < seq) {
    __nanosleep(20);
    if (clock64() - t0 > kWaitCycles) wait_failed("the producer's hold (hand-off, staged)", seq, *opened);
  }
}

__device__ __forceinline__ float lo_f32(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f32(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

}  // namespace anvil::decode_stack_gpu

#endif  // ANVIL_HAS_BULK_COPY
