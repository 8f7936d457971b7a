// GPU decode_stack: all layers of one decode token in one persistent launch (contract: decode_stack.h).
//
// Why (H200, Llama-3.1-8B shape, bf16, batch 1): the per-op step spends 4.9 ms against the 3.6 ms it takes to
// read the weights once. ncu put 0.76 ms of that in GEMM ramps and tails (q|k|v at 73% of copy, o at 60%: a
// kernel that streams 34-50 MB still pays ~3-4 µs to fill and drain the machine) and 0.56 ms in 7 small kernels
// per layer (2.3-3.8 µs each, on the critical path: each waits for the GEMM before it and the GEMM after waits
// for it). Folding the norms into the GEMMs' x staging was measured slower (docs/decode_kernels.md): every
// column tile redid the norm while its weight stream stood still.
//
// Design. One block per SM for the whole step (cooperative launch; 12 consumer warps + 1 producer warp).
// - Weights: the producer warp's lane 0 walks the block's share of every matrix of every layer in a fixed order
//   (layer by layer: q|k|v, o, gate, up, down; the block owns a contiguous range of rows of each) and issues one
//   bulk copy per 16 KB chunk into a ring of S slots (S = 12 at the 8B shape: 192 KB of the 227 KB), each slot
//   with a "full" and an "empty" mbarrier. Nothing it reads depends on activations, so it runs ahead of the
//   math by up to S chunks across phase boundaries (12 x 16 KB per SM is 25 MB in flight, ~6 µs of HBM time),
//   except that before a matrix that follows a hand-off it issues only the first two thirds of the ring, then
//   waits for the block to stage the hand-off's input, whose reads would otherwise queue behind those copies (the
//   producer's hold, decode_stack_gpu.cuh).
// - Math, bf16: consumer warp w takes rows w, w + 12, ... of the block's range (a chunk holds whole rows, or a
//   piece of one row), waits on the chunk's full barrier, takes the row's dot product with x (x staged in shared
//   memory as bf16, 16-byte reads, conflict-free), reduces it over the warp and writes y; the last warp done with
//   a chunk releases the slot. Per SM the HBM share is ~16 B/clk; a bf16 row of 4096 costs a warp ~300 issue
//   slots, and 12 warps (3 per scheduler) keep bf16 at the copy rate.
// - Math, FP8: on the FMA pipes an FP8 row cost ~560 issue slots (decode to f16 and f32, 3 shared loads and 16
//   FMAs per 16 weights) and those phases ran at 3.0-3.5 TB/s, consumer-bound. So FP8 chunks are tiles of 16
//   rows x 1024 columns that 4 warps multiply on the tensor cores (gemm_tiles in decode_stack_tiles.cuh), with x
//   staged as f16 scaled by a power of two. A tile is one linear copy from a pre-tiled copy of the weights
//   (decode_stack_pretile.cu; 5.6% faster per token than the tiled copy through a tensor map that remains for
//   when device memory has no room for the copy; docs/decode_kernels.md, sixteenth round).
// - Phases per layer:
//   1. h += b, norm (every block computes the 4096-wide norm itself, keeping its own copy of h; block 0 also
//      stores h for the host), q|k|v GEMM;
//   2. rope and attention: block (kv-head g, split s) rotates its q-heads and k, appends k and v to the cache
//      (last split) and attends over its rows; splits are combined by the last block of the group (ticket). A
//      context of one split takes a block per q-head instead (attn_split);
//   3. o GEMM (x = the attention output);  4. h += b, norm, the gate and up GEMMs (a block owns the same rows
//   of both, keeps their outputs in shared memory and writes silu(gate) * up for them);  5. down GEMM.
// - Hand-offs without grid barriers: what a phase writes for other blocks (q|k|v, the attention output, o's and
//   down's outputs, down's input) is stored as 32-bit words of a bf16 and a tag naming the write; the next phase
//   waits for a relaxed count of the writers (the attention blocks poll their q|k|v words directly) and takes each
//   word once its tag is there (decode_stack_gpu.cuh). Until this, five grid barriers a layer each cost a chain of
//   L2 round trips queued behind the weight ring's bulk copies.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/gpu/common.cuh"
#include "core/env.h"
#include "kernels/decode_stack/decode_stack.h"
#include "kernels/decode_stack/decode_stack_attention.cuh"
#include "kernels/decode_stack/decode_stack_chunk_trace.cuh"
#include "kernels/decode_stack/decode_stack_gpu.cuh"
#include "kernels/decode_stack/decode_stack_tiles.cuh"
#include "kernels/decode_stack/decode_stack_trace.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/swiglu/swiglu_gpu.cuh"

namespace anvil {

#ifdef ANVIL_HAS_BULK_COPY
namespace {

using namespace decode_stack_gpu;

using decode_stack_trace::kStamps;  // ANVIL_DECODE_STACK_TRACE=1 (decode_stack_trace.h)

// ---- producer ----------------------------------------------------------------------------------------------
// Its pace sets each SM's share of HBM. FP8, H200, 8B shape (docs/decode_kernels.md, seventeenth and eighteenth
// rounds): reloading ly.tiled[mi] per chunk (a global load queued behind the SM's copies) held the producer to ~0.51
// µs a chunk, 32 GB/s per SM, below the 35 GB/s share of the 4.65 TB/s at which HBM streams reads
// (bench/handoff_probe.cu). With the chunk's address stepped instead (~0.38 µs a chunk) it went 2.7% slower: slots
// freed together were refilled back to back, the SMs' gate|up phases spread from 27.2-28.2 to 23.8-26.0 µs, and every
// hand-off waits for the slowest block. So FP8 copies now leave at least p.pace SM cycles apart: 760 (0.38 µs at
// 1.98 GHz, 43 GB/s a SM) spaces the bursts without holding the rate under the share. Generation loop, ms/token, pace
// 0 / 560 / 640 / 720 / 760 / 800 / 840 cycles: 2.654 / 2.630 / 2.577 / 2.547 / 2.542 / 2.551 / 2.575, against
// 2.582 for the reload; the layer 68.4 -> 67.2 µs (gate|up 27.9 -> 27.1). bf16 lost with any pace (3.868 -> 3.895 at
// 700, 4.131 at 900), so its copies are not paced. The chunks a matrix issues before its hold (they land under the
// hand-off's reads) go further apart, p.pace_held: loop 2.633 / 2.620 / 2.567 / 2.539 ms/token at 0 / 380 / 760 /
// 1500 cycles (one session); in a later one 2500 / 3000 gave 2.815 / 3.104 against 2.52 at 1500. The tensor-map
// tiles (no room for the pre-tiled copy) are paced alike, unmeasured: their copies took ~0.69 µs a chunk (tenth
// round), so the pace seldom binds there. Those paces were measured over 132 blocks. Over 128 (stack_grid, the 8B
// shape since the twenty-sixth round) each block's share of HBM is 132 / 128 times larger, and both paces moved:
// 640 / 680 / 700 / 720 / 740 / 760 cycles gave 2.379 / 2.366 / 2.359 / 2.354 / 2.355 / 2.366 ms/token; the held
// ones at 1000 / 1100 / 1200 / 1300 / 1400 / 1500, two runs each: 2.335, 2.337 / 2.336, 2.338 / 2.334, 2.332 /
// 2.333, 2.335 / 2.341, 2.346 / 2.352, 2.363. The defaults are 740 and 1200 over 128 blocks, scaled by grid / 128
// for other grids (763 and 1237 over 132: not measured as such).
template <int ES>
__device__ void produce(const Params& p, uint8_t* ring, uint64_t* full, uint64_t* empty, volatile unsigned* issued,
                        volatile unsigned* opened) {
  unsigned c = 0;
  long long last_issue = 0;
  const uint64_t policy = p.l2_first ? anvil_l2_evict_first() : 0;
  for (int l = 0; l < p.L; l++) {
    const Layer& ly = p.layers[l];
#pragma unroll 1
    for (int mi = 0; mi < kMats; mi++) {
      const Mat m = mat_of<ES>(p, ly, mi);
      const Plan pl = plan_of<ES>(m);
      const unsigned seq = hold_seq(l, mi);
      // FP8 pre-tiled: the block's chunks of the matrix are consecutive 16 KB in the copy, from its first.
      const uint8_t* tiled =
          ES == 1 && ly.tiled[mi]
              ? ly.tiled[mi] + pretiled_chunk(m.N, pl.ppr, int(gridDim.x), int(blockIdx.x), 0, 0) * kChunk
              : nullptr;
      for (int u = 0; u < pl.units; u++) {
        const int ra = pl.r0 + u * pl.rpc, nr = min(pl.rpc, pl.r1 - ra);
        for (int i = 0; i < pl.ppr; i++, c++) {
          if (seq && u * pl.ppr + i == p.hold) hold_wait(opened, seq);
          const int k0 = i * pl.pe, kn = pl.ppr == 1 ? m.K * nr : min(pl.pe, m.K - k0);
          const unsigned slot = c % unsigned(p.slots), use = c / unsigned(p.slots);
          // A tile (FP8) is a whole chunk: out-of-range rows and blocks arrive as zeros.
          chunk_trace::stamp(c, 0);
          gpu::ring::claim_slot(full, empty, slot, use, ES == 1 ? unsigned(kChunk) : unsigned(kn * ES), c);
          chunk_trace::stamp(c, 1);
          uint8_t* dst = ring + size_t(slot) * kChunk;
          const int pace = seq && u * pl.ppr + i < p.hold ? p.pace_held : p.pace;
          if (ES == 1 && pace > 0) {  // at least `pace` SM cycles since the last issue (FP8: see above)
            while (clock64() - last_issue < pace) {
            }
            last_issue = clock64();
          }
          if (ES == 1 && tiled) {  // a pre-tiled chunk: 16 KB at one address
            const uint8_t* src = tiled + (int64_t(u) * pl.ppr + i) * kChunk;
            if (p.l2_first) anvil_bulk_copy_g2s(dst, src, unsigned(kChunk), &full[slot], policy);
            else anvil_bulk_copy_g2s(dst, src, unsigned(kChunk), &full[slot]);
          } else if constexpr (ES == 1) {
            // Rows [ra, ra + 16) x blocks [k0 / 128, + 8); the rows past the block's share are read and not used.
            // One copy per 16 KB, like bf16: 8 copies of 2 KB rows measured the copy engine at ~9 B/clk per SM,
            // half the HBM share.
            if (p.l2_first) anvil_tile_copy_g2s_3d(dst, m.tmap, 0, m.row0 + ra, k0 / 128, &full[slot], policy);
            else anvil_tile_copy_g2s_3d(dst, m.tmap, 0, m.row0 + ra, k0 / 128, &full[slot]);
          } else {
            const uint8_t* src = m.w + (int64_t(ra) * m.K + k0) * ES;
            if (p.l2_first) anvil_bulk_copy_g2s(dst, src, unsigned(kn * ES), &full[slot], policy);
            else anvil_bulk_copy_g2s(dst, src, unsigned(kn * ES), &full[slot]);
          }
          issued[slot] = use;
          chunk_trace::stamp(c, 2);
        }
      }
    }
  }
}


// Partial dot product of n bf16 weights at w (shared) with x[0, n) (shared, bf16): each lane takes the 16-byte
// packs lane, lane + W, ...; the caller reduces over the warp.
__device__ __forceinline__ float dot(const uint8_t* w, const bf16* x, int n, int lane) {
  const int packs = n / 8;
  float a0 = 0.f, a1 = 0.f;
#pragma unroll 2
  for (int q = lane; q < packs; q += kW) {
    const uint4 wv = *reinterpret_cast<const uint4*>(w + q * 16);
    const uint4 xv = *reinterpret_cast<const uint4*>(x + q * 8);
    a0 = fmaf(lo_f32(wv.x), lo_f32(xv.x), a0), a1 = fmaf(hi_f32(wv.x), hi_f32(xv.x), a1);
    a0 = fmaf(lo_f32(wv.y), lo_f32(xv.y), a0), a1 = fmaf(hi_f32(wv.y), hi_f32(xv.y), a1);
    a0 = fmaf(lo_f32(wv.z), lo_f32(xv.z), a0), a1 = fmaf(hi_f32(wv.z), hi_f32(xv.z), a1);
    a0 = fmaf(lo_f32(wv.w), lo_f32(xv.w), a0), a1 = fmaf(hi_f32(wv.w), hi_f32(xv.w), a1);
  }
  return a0 + a1;
}

// y[rows of this block] = x @ w^T for one matrix, chunks from the ring; `c` is the running chunk count.
// bf16 weights on the FMA pipes (they run at the copy rate there).
template <class O>
__device__ void gemm_rows(const Params& p, const Mat& m, const uint8_t* ring, uint64_t* full, uint64_t* empty,
                          volatile unsigned* issued, volatile unsigned* done, const bf16* x, O y,
                          unsigned& c) {
  constexpr int ES = 2;
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW;
  const Plan pl = plan_of<ES>(m);
  auto finish = [&](int row, float acc) {
    acc = gpu::warp_sum(acc);
    if (lane == 0) y.put(row, acc);
  };
  if (pl.ppr == 1) {
    // Whole rows: warp w takes rows w, w + 12, ... of the block's range, so the rows of one chunk (2 bf16 rows of
    // 4096) are consumed by as many warps at once; the last of them to finish frees the slot. (A warp per chunk
    // measured the FMA-pipe FP8 phases at ~3 TB/s: one warp needed several µs per 16 KB chunk.)
    for (int i = warp; i < pl.r1 - pl.r0; i += kWarps) {
      const int u = i / pl.rpc, nr = min(pl.rpc, pl.r1 - pl.r0 - u * pl.rpc);
      const unsigned cc = c + unsigned(u), slot = cc % unsigned(p.slots);
      if (i % pl.rpc == 0 && lane == 0) chunk_trace::stamp(cc, 3);
      wait_chunk(issued, full, slot, cc / unsigned(p.slots), cc);
      if (i % pl.rpc == 0 && lane == 0) chunk_trace::stamp(cc, 4);
      const uint8_t* wb = ring + size_t(slot) * kChunk + size_t(i % pl.rpc) * m.K * ES;
      finish(pl.r0 + i, dot(wb, x, m.K, lane));
      __syncwarp();
      if (lane == 0) chunk_trace::stamp_last(cc, 5);
      if (lane == 0 && atomicAdd(const_cast<unsigned*>(&done[slot]), 1u) == unsigned(nr - 1)) {
        done[slot] = 0;  // before the release: the slot's next rows count from zero
        anvil_mbar_arrive(&empty[slot]);
      }
    }
  }
  // Rows cut into pieces (one chunk each): warp w takes rows w, w + 12, ..., all pieces of a row in order.
  for (int u = warp; u < pl.units && pl.ppr > 1; u += kWarps) {
    float acc = 0.f;
    for (int i = 0; i < pl.ppr; i++) {
      const unsigned cc = c + unsigned(u * pl.ppr + i), slot = cc % unsigned(p.slots);
      if (lane == 0) chunk_trace::stamp(cc, 3);
      wait_chunk(issued, full, slot, cc / unsigned(p.slots), cc);
      if (lane == 0) chunk_trace::stamp(cc, 4);
      const int k0 = i * pl.pe;
      acc += dot(ring + size_t(slot) * kChunk, x + k0, min(pl.pe, m.K - k0), lane);
      __syncwarp();
      if (lane == 0) chunk_trace::stamp_last(cc, 5);
      if (lane == 0) anvil_mbar_arrive(&empty[slot]);
    }
    finish(pl.r0 + u, acc);
  }
  c += unsigned(pl.units * pl.ppr);
}

// y[rows of this block] = x @ w^T for one matrix; ws: FP8 scales (per row when ws_stride is 1), xinv: FP8 x's
// staging scale undone.
template <int ES, class O>
__device__ __forceinline__ void gemm(const Params& p, const Mat& m, const float* ws, int ws_stride,
                                     const uint8_t* ring, uint64_t* full, uint64_t* empty, volatile unsigned* issued,
                                     volatile unsigned* done, const bf16* x, float xinv, float* part, O y,
                                     unsigned& c, int g0 = 0) {
  if constexpr (ES == 1) gemm_tiles(p, m, ws, ws_stride, ring, full, empty, issued, done, x, xinv, part, g0, y, c);
  else gemm_rows(p, m, ring, full, empty, issued, done, x, y, c);
}

__device__ __forceinline__ uint32_t pack2(float a, float b) {
  return uint32_t(from_f32<bf16>(a).bits) | (uint32_t(from_f32<bf16>(b).bits) << 16);
}

// The power of two that takes values bounded by `bound` under 2^15 (f16's largest finite value is 65504), for
// staging FP8 GEMM inputs as f16: a bf16 value within 2^29 of the bound is exact there, and smaller ones add
// less than 2^-29 of the largest product. 1 when the bound is 0 or not finite.
__device__ __forceinline__ float f16_scale(float bound) {
  if (!(bound > 0.f) || !(bound <= 3.4e38f)) return 1.f;
  const int e = int((__float_as_uint(bound) >> 23) & 0xffu) - 126;  // bound < 2^e
  return __uint_as_float(uint32_t(127 + min(max(15 - e, -126), 127)) << 23);
}
// Eight bf16 (a pack) times sc as eight f16 (exact: sc is a power of two that keeps them in range).
__device__ __forceinline__ uint4 bf16_pack_to_f16(const uint32_t (&v)[4], float sc) {
  return make_uint4(anvil_f16x2_rn(lo_f32(v[0]) * sc, hi_f32(v[0]) * sc),
                    anvil_f16x2_rn(lo_f32(v[1]) * sc, hi_f32(v[1]) * sc),
                    anvil_f16x2_rn(lo_f32(v[2]) * sc, hi_f32(v[2]) * sc),
                    anvil_f16x2_rn(lo_f32(v[3]) * sc, hi_f32(v[3]) * sc));
}
__device__ __forceinline__ float pack_absmax(const uint32_t (&v)[4], float m) {
#pragma unroll
  for (int j = 0; j < 4; j++) m = fmaxf(m, fmaxf(fabsf(lo_f32(v[j])), fabsf(hi_f32(v[j]))));
  return m;
}

// x = rms_norm(h) * gamma into shared memory (C values), where h = hin (+ badd, tagged words with `tag`, rounded to
// bf16). The block keeps that h in its own copy in p.hp (hin = nullptr on the next call: each thread reads back
// only the packs it wrote itself), and block 0 also stores it to hout for the host. Each thread re-reads only the
// x slots it wrote before the reduction. F16 (FP8 weights): x is stored as f16 times sc, sc from the bound
// max|h| * r * max|gamma| (gmax, per layer, from the host), which the same reduction as the sum of squares gives;
// returns 1 / sc (1 for bf16).
template <bool F16>
__device__ float stage_norm(const Params& p, const bf16* hin, const uint32_t* badd, uint32_t tag, bf16* hout,
                            const bf16* gamma, float gmax, bf16* x, float* red) {
  bf16* hown = p.hp + int64_t(blockIdx.x) * p.C;
  if (!hin) hin = hown;
  constexpr int U = 2;  // packs in flight per thread: C = 4096 is 512 packs over 384 threads
  const int packs = p.C / 8;
  float ss = 0.f, hmax = 0.f;
  auto add = [&](int q, uint4 h, uint4 b) {
    if (badd) {
      h.x = pack2(lo_f32(h.x) + lo_f32(b.x), hi_f32(h.x) + hi_f32(b.x));
      h.y = pack2(lo_f32(h.y) + lo_f32(b.y), hi_f32(h.y) + hi_f32(b.y));
      h.z = pack2(lo_f32(h.z) + lo_f32(b.z), hi_f32(h.z) + hi_f32(b.z));
      h.w = pack2(lo_f32(h.w) + lo_f32(b.w), hi_f32(h.w) + hi_f32(b.w));
      if (hout && blockIdx.x == 0) anvil_store16(hout + q * 8, h.x, h.y, h.z, h.w);
    }
    anvil_store16(hown + q * 8, h.x, h.y, h.z, h.w);
    const uint32_t hh[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int j = 0; j < 4; j++) ss += lo_f32(hh[j]) * lo_f32(hh[j]) + hi_f32(hh[j]) * hi_f32(hh[j]);
    if constexpr (F16) hmax = pack_absmax(hh, hmax);
    anvil_store16(x + q * 8, h.x, h.y, h.z, h.w);
  };
  for (int q0 = threadIdx.x; q0 < packs; q0 += U * kConsumers) {
    uint4 hv[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (q0 + u * kConsumers < packs) hv[u] = anvil_load16_l2(hin + (q0 + u * kConsumers) * 8);
    if (badd) {
      tagged_packs<U>(badd, q0, kConsumers, packs, tag,
                      [&](int q, uint4 b) { add(q, hv[(q - q0) / kConsumers], b); });
    } else {
#pragma unroll
      for (int u = 0; u < U; u++)
        if (q0 + u * kConsumers < packs) add(q0 + u * kConsumers, hv[u], hv[u]);
    }
  }
  float sc = 1.f, r;
  if constexpr (F16) {
    consumer_sum_max(ss, hmax, red);
    r = rsqrtf(ss / float(p.C) + p.eps);
    sc = f16_scale(hmax * r * gmax * 1.00390625f);  // bf16 rounding may add 2^-8
  } else {
    r = rsqrtf(consumer_sum(ss, red) / float(p.C) + p.eps);
  }
  for (int q = threadIdx.x; q < packs; q += kConsumers) {
    const uint4 hv = *reinterpret_cast<const uint4*>(x + q * 8);
    const uint4 gv = *reinterpret_cast<const uint4*>(gamma + q * 8);
    uint32_t o[4];
    const uint32_t hh[4] = {hv.x, hv.y, hv.z, hv.w}, gg[4] = {gv.x, gv.y, gv.z, gv.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
      o[j] = pack2(lo_f32(hh[j]) * r * lo_f32(gg[j]), hi_f32(hh[j]) * r * hi_f32(gg[j]));
    if constexpr (F16) {
      const uint4 f = bf16_pack_to_f16(o, sc);
      anvil_store16(x + q * 8, f.x, f.y, f.z, f.w);
    } else {
      anvil_store16(x + q * 8, o[0], o[1], o[2], o[3]);
    }
  }
  consumer_sync();
  return 1.f / sc;
}

// x = v (n values, tagged words with `tag`) into shared memory. F16: as f16 times sc, from the block's max |v| (a
// second pass over the thread's own packs); returns 1 / sc (1 for bf16).
// U: packs in flight per thread (2: C = 4096 in one round trip; H = 14336, 1792 packs over 384 threads, in three).
// 4-5 packs brought H in one or two, but their registers made the FP8 tile loop and the attention loop spill.
template <bool F16, int U>
__device__ float stage_copy(const uint32_t* v, uint32_t tag, int n, bf16* x, float* red) {
  float m = 0.f;
  for (int q0 = threadIdx.x; q0 < n / 8; q0 += U * kConsumers)
    tagged_packs<U>(v, q0, kConsumers, n / 8, tag, [&](int q, uint4 a) {
      anvil_store16(x + q * 8, a.x, a.y, a.z, a.w);
      if constexpr (F16) m = pack_absmax({a.x, a.y, a.z, a.w}, m);
    });
  float sc = 1.f;
  if constexpr (F16) {
    float unused = 0.f;
    consumer_sum_max(unused, m, red);
    sc = f16_scale(m);
    for (int q = threadIdx.x; q < n / 8; q += kConsumers) {
      const uint4 a = *reinterpret_cast<const uint4*>(x + q * 8);
      const uint4 f = bf16_pack_to_f16({a.x, a.y, a.z, a.w}, sc);
      anvil_store16(x + q * 8, f.x, f.y, f.z, f.w);
    }
  }
  consumer_sync();
  return 1.f / sc;
}

// down's x = silu(gate) * up, as swiglu_fwd computes it for bf16, for the block's rows [a, b) of gate and up
// (their GEMM outputs in shared memory), into the global (H) vector of tagged words every block stages next.
__device__ void swiglu_rows(const bf16* g, const bf16* u, int a, int b, Out<true> out) {
  consumer_sync();
  for (int i = threadIdx.x; i < b - a; i += kConsumers)
    out.put(a + i, swiglu_f32<bf16>(to_f32(g[i]), to_f32(u[i])));
}

// ---- the kernel --------------------------------------------------------------------------------------------
template <int ES, int HD, int G>
__global__ void __launch_bounds__(kThreads, 1) decode_stack_kernel(const Params p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* ring = smem;
  bf16* x = reinterpret_cast<bf16*>(smem + size_t(p.slots) * kChunk);
  float* red = reinterpret_cast<float*>(smem + size_t(p.slots) * kChunk + p.x_bytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(red + kWarps * 2);
  uint64_t* empty = full + kMaxSlots;
  volatile unsigned* issued = reinterpret_cast<unsigned*>(empty + kMaxSlots);
  volatile unsigned* done = issued + kMaxSlots;  // rows of the slot's chunk consumed so far
  // The launch's generation: the launch before advanced it, and nothing changes it until every block is done. In
  // shared memory, not in a register: a register live across the attention's loop made that loop spill at the
  // 128-register cap (13 warps: 4 on one scheduler).
  volatile unsigned* gen = done + kMaxSlots;
  volatile unsigned* opened = gen + 1;  // the last hand-off whose input the block has staged (hold_seq)
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.slots; s++) {
      anvil_mbar_init(&full[s], 1), anvil_mbar_init(&empty[s], 1);
      issued[s] = ~0u;
      done[s] = 0;
    }
    *gen = anvil_load_relaxed_gpu(p.counters + 1 + p.NKV);
    *opened = 0;
    anvil_mbar_init_fence();
  }
  __syncthreads();
  if (ES == 1 && threadIdx.x == 0 && (anvil_smem_u32(ring) & 1023u) != 0) {  // the 128-byte swizzle's alignment
    printf("decode_stack: the ring starts at shared address %u, not on 1024 bytes\n", anvil_smem_u32(ring));
    __trap();
  }
  if (threadIdx.x >= kConsumers) {  // the producer warp: one lane issues every copy
    if (threadIdx.x == kConsumers) produce<ES>(p, ring, full, empty, issued, opened);
    return;
  }
  constexpr bool F16 = ES == 1;  // FP8 weights: GEMM inputs staged as scaled f16 for the tensor cores
  unsigned c = 0;
  float xinv = 1.f;
  auto tag = [&](int l, int k) { return tag_of(*gen, p.L, l, k); };
  // The residual stream for the host: block 0 writes h + b to h0 at the input norms of layers 1.. (layer 0 reads
  // the step's input there) and to h1 at the post-attention norms, so the last layer's h is in h1. Every block
  // reads its own copy (stage_norm).
  // This block's rows [rows_a, rows_b) of gate and of up, whose outputs stay in shared memory after x's C values.
  const int rows_a = int(int64_t(p.H) * blockIdx.x / gridDim.x);
  const int rows_b = int(int64_t(p.H) * (blockIdx.x + 1) / gridDim.x);
  const int up_g0 = (rows_b - rows_a + kTileRows - 1) / kTileRows % kTileGroups;  // FP8: gate's tiles, rotated on
  bf16* y_gate = x + (p.C + 7) / 8 * 8;
  bf16* y_up = y_gate + (rows_b - rows_a + 7) / 8 * 8;
  // FP8: the tile GEMMs' quarter sums, two buffers of 4 x (the block's rows at most) f32, alternating by GEMM.
  float* part[2] = {reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(x) + p.part_offset),
                    reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(x) + p.part_offset) + p.part_floats};
  unsigned long long* tr = p.trace ? p.trace + blockIdx.x : nullptr;
  auto stamp = [&](int l, int k) {
    if (tr && threadIdx.x == 0) tr[(int64_t(l) * kStamps + k) * gridDim.x] = anvil_globaltimer_ns();
  };
  if (tr && threadIdx.x == 0) tr[int64_t(p.L) * kStamps * gridDim.x] = anvil_globaltimer_ns();  // the start
  // Hand-offs (decode_stack_gpu.cuh): the block counts itself after writing one and waits for the count of the next
  // it reads; the words' tags tell it when a store the count overtook has landed.
  for (int l = 0; l < p.L; l++) {
    const Layer& ly = p.layers[l];
    if (l == 0) {
      xinv = stage_norm<F16>(p, p.h0, nullptr, 0, nullptr, ly.in_norm, ly.in_gmax, x, red);
    } else {
      handoff_wait(p, 4, unsigned(l) * gridDim.x);
      xinv = stage_norm<F16>(p, nullptr, p.tb, tag(l - 1, 4), p.h0, ly.in_norm, ly.in_gmax, x, red);
      hold_open(opened, hold_seq(l, 0));
    }
    stamp(l, 0);
    gemm<ES>(p, mat_of<ES>(p, ly, 0), ly.ws[0], ly.ws_stride[0], ring, full, empty, issued, done, x, xinv, part[0],
             out_tagged(p.qkv, tag(l, 0)), c);
    stamp(l, 1);
    consumer_sync();
    stamp(l, 2);
    attention<HD, G>(p, ly, reinterpret_cast<float*>(x), tag(l, 0));  // the attention blocks poll q|k|v themselves
    stamp(l, 3);
    consumer_sync();
    stamp(l, 4);
    handoff_wait(p, 1, unsigned(l + 1) * attn_writers<G>(p));  // one writer per (kv-head, q-head subset)
    xinv = stage_copy<F16, 2>(p.att, tag(l, 1), p.QD, x, red);
    hold_open(opened, hold_seq(l, 1));
    stamp(l, 5);
    gemm<ES>(p, mat_of<ES>(p, ly, 1), ly.ws[1], ly.ws_stride[1], ring, full, empty, issued, done, x, xinv, part[1],
             out_tagged(p.tb, tag(l, 2)), c);
    stamp(l, 6);
    handoff_arrive(p, 2);
    stamp(l, 7);
    handoff_wait(p, 2, unsigned(l + 1) * gridDim.x);
    xinv = stage_norm<F16>(p, nullptr, p.tb, tag(l, 2), p.h1, ly.post_norm, ly.post_gmax, x, red);
    hold_open(opened, hold_seq(l, 2));
    stamp(l, 8);
    gemm<ES>(p, mat_of<ES>(p, ly, 2), ly.ws[2], ly.ws_stride[2], ring, full, empty, issued, done, x, xinv, part[0],
             out_plain(y_gate, rows_a), c);
    const float* ws_up = ly.ws[2] ? ly.ws[2] + int64_t(p.H) * ly.ws_stride[2] : nullptr;
    gemm<ES>(p, mat_of<ES>(p, ly, 3), ws_up, ly.ws_stride[2], ring, full, empty, issued, done, x, xinv, part[1],
             out_plain(y_up, rows_a), c, up_g0);
    swiglu_rows(y_gate, y_up, rows_a, rows_b, out_tagged(p.gu, tag(l, 3)));
    handoff_arrive(p, 3);
    stamp(l, 9);
    handoff_wait(p, 3, unsigned(l + 1) * gridDim.x);
    xinv = stage_copy<F16, 2>(p.gu, tag(l, 3), p.H, x, red);
    hold_open(opened, hold_seq(l, 4));
    stamp(l, 10);
    // The last layer's output goes to the host as plain bf16.
    if (l + 1 < p.L)
      gemm<ES>(p, mat_of<ES>(p, ly, 4), ly.ws[3], ly.ws_stride[3], ring, full, empty, issued, done, x, xinv, part[0],
               out_tagged(p.tb, tag(l, 4)), c);
    else
      gemm<ES>(p, mat_of<ES>(p, ly, 4), ly.ws[3], ly.ws_stride[3], ring, full, empty, issued, done, x, xinv, part[0],
               out_plain(p.branch, 0), c);
    stamp(l, 11);
    if (l + 1 < p.L) handoff_arrive(p, 4);
    else consumer_sync();
    stamp(l, 12);
  }
  // The last block done resets the counts and advances the generation for the next launch.
  if (threadIdx.x == 0 && atomicAdd(p.counters, 1u) == gridDim.x - 1) {
    p.counters[0] = 0;
    for (int k = 1; k <= kCounts; k++) p.counters[1 + p.NKV + k] = 0;
    p.counters[1 + p.NKV] = decode_stack_tags::next_gen(*gen);
  }
}

// The x region: the largest GEMM input (T), the attention phase's floats, or x (C) with the gate and up outputs
// of the block's rows (at most ceil(H / grid) each); then (FP8) the tile GEMMs' two quarter-sum buffers of 4 x the
// block's rows at most (the attention phase may overwrite them: no GEMM is in flight then).
struct XRegion {
  int part_offset, part_floats, bytes;
};
XRegion x_region(const DecodeStackShape& s, int grid) {
  auto r128 = [](int64_t b) { return int((b + 127) / 128 * 128); };
  const int64_t kmax = std::max({s.C, s.NH * s.HD, s.H});
  const int64_t rows = (s.H + grid - 1) / grid;
  const int64_t nmax = std::max({s.NH * s.HD + 2 * s.NKV * s.HD, s.C, s.H});
  XRegion r;
  r.part_offset = r128(std::max(kmax * 2, ((s.C + 7) / 8 * 8 + 2 * ((rows + 7) / 8 * 8)) * 2));
  // 4 quarters x the block's rows, or 12 warps x 32 rows when a matrix has fewer tiles than groups (gemm_tiles).
  r.part_floats = int(kTileQuarters * std::max<int64_t>((nmax + grid - 1) / grid, kTileGroups * 2 * kTileRows));
  r.bytes = r128(std::max(int64_t(r.part_offset) + 2 * r.part_floats * 4,
                          int64_t(attn_floats(int(s.HD), int(s.NH / s.NKV))) * 4));
  return r;
}
int x_region_bytes(const DecodeStackShape& s, int grid) { return x_region(s, grid).bytes; }
constexpr int kMiscBytes = kWarps * 2 * 4 + 2 * kMaxSlots * 8 + 2 * kMaxSlots * 4 + 16;  // + generation, opened

// Ring slots that fit the device's per-block shared memory next to the x region (H200, 8B shape: 12).
int ring_slots(const DecodeStackShape& s, int grid) {
  const auto info = gpu::device_info(gpu::current_device());
  const int64_t room = int64_t(info.smem_per_block_optin) - x_region_bytes(s, grid) - kMiscBytes;
  return int(std::min<int64_t>(kMaxSlots, room / kChunk));
}

constexpr int kFp8PaceCycles = 740;       // the producer's default pace for FP8 copies (produce())
constexpr int kFp8PaceHeldCycles = 1200;  // the same for the chunks before a hold
constexpr int kFp8PaceGrid = 128;         // the blocks both were measured over (H200); scaled by grid / this
// A ring knob read from the environment: `dflt` when unset, else an integer in [lo, hi] or a clear error.
int ring_knob(const char* name, int lo, int hi, int dflt) { return env_int("decode_stack", name, lo, hi, dflt); }

// The launch's blocks, one per SM at most: fit_stack_grid's, or ANVIL_DECODE_STACK_GRID=n (for A/B timing).
int stack_grid(const DecodeStackShape& s, DType wd) {
  const int sms = gpu::device_info(gpu::current_device()).compute_units;
  if (s.NKV > sms) return sms;  // refused by decode_stack_unsupported_gpu
  return ring_knob("ANVIL_DECODE_STACK_GRID", int(s.NKV), sms, fit_stack_grid(s, dtype_is_fp8(wd) ? 1 : 2, sms));
}

// Byte offsets of the plan's scratch: the hand-offs qkv (QD + 2 KVD), att (QD), gu (H), tb (C) as 4-byte tagged
// words, each rounded to 64 words, the attention partials (NKV, max_splits, G, HD + 2) f32, and the blocks' own
// copies of the residual stream (grid, C) bf16. Zeroed once: tag 0 is no launch's.
struct Scratch {
  int64_t qkv = 0, att, gu, tb, part, hp, bytes;
  Scratch(const DecodeStackShape& s, int64_t max_splits, int grid) {
    auto r64 = [](int64_t n) { return (n + 63) / 64 * 64; };
    const int64_t QD = s.NH * s.HD, KVD = s.NKV * s.HD;
    att = qkv + 4 * r64(QD + 2 * KVD), gu = att + 4 * r64(QD), tb = gu + 4 * r64(s.H), part = tb + 4 * r64(s.C);
    hp = part + 4 * r64(s.NKV * max_splits * (s.NH / s.NKV) * (s.HD + 2));
    bytes = hp + 2 * int64_t(grid) * r64(s.C);
  }
};

// max |v| of a norm weight (once per plan, the elementwise amax op): FP8 x staging scales from it (stage_norm).
float abs_max(const Tensor& v) {
  Tensor m = Tensor::empty({1}, DType::f32, v.device());
  amax(v, m);
  return m.to(Device::cpu()).data<float>()[0];
}

// The FP8 tile map of a weight (N rows, K bytes, K a multiple of 128): gpu::ring::encode_weight_tiles.
std::string encode_weight_map(void* map128, const Tensor& w) {
  return gpu::ring::encode_weight_tiles(map128, w.data_ptr(), uint64_t(w.size(0)), uint64_t(w.size(1)));
}

using KernelFn = void (*)(const Params);
template <int ES, int HD>
KernelFn pick_g(int G) {
  switch (G) {
    case 1: return decode_stack_kernel<ES, HD, 1>;
    case 2: return decode_stack_kernel<ES, HD, 2>;
    case 4: return decode_stack_kernel<ES, HD, 4>;
    default: return decode_stack_kernel<ES, HD, 8>;
  }
}
template <int ES>
KernelFn pick(int HD, int G) {
  switch (HD) {
    case 32: return pick_g<ES, 32>(G);
    case 64: return pick_g<ES, 64>(G);
    default: return pick_g<ES, 128>(G);
  }
}

// FP8: a pre-tiled copy of the weights (backends/gpu/weight_ring.cuh) when ANVIL_DECODE_STACK_TILES=1, or by
// default when it fits in gpu::room_for_copies() (so the KV cache and the prefill's activations keep room); 0 keeps
// the tensor maps only. H200, 8B shape: +7.2 GB, 2.74 -> 2.58 ms per token.
// `shared`, when given, is the model's copy: used when defined, else set to the one made here.
// Returns the copy (host[l].tiled point into it), or an undefined tensor.
Tensor pretile(const DecodeStackShape& s, int64_t L, int grid, std::vector<Layer>& host, const Device& dev,
               Tensor* shared) {
  const int mode = ring_knob("ANVIL_DECODE_STACK_TILES", 0, 1, -1);  // -1: by the room left
  if (mode == 0) return Tensor();
  const int64_t bytes = L * pretiled_layer_bytes(s, grid);
  if (shared && shared->defined()) {
    ANVIL_CHECK(shared->numel() == bytes, "decode_stack", str("a shared FP8 tile copy of ", bytes, " B"),
                shared->describe());
    pretile_weights(s, grid, host, shared->data<uint8_t>(), false);
    return *shared;
  }
  if (mode < 0 && bytes > gpu::room_for_copies()) return Tensor();
  Tensor tiles;
  try {
    tiles = Tensor::empty({bytes}, DType::u8, dev);
  } catch (const Error&) {
    if (mode == 1) throw;
    return Tensor();  // by default, out of memory keeps the tensor maps
  }
  pretile_weights(s, grid, host, tiles.data<uint8_t>(), true);
  if (shared) *shared = tiles;
  return tiles;
}

}  // namespace

std::string decode_stack_unsupported_gpu(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers) {
  const auto info = gpu::device_info(gpu::current_device());
  if (!info.bulk_copy) return str("a device with bulk copies (sm_90+), got ", info.arch);
  if (s.NKV > info.compute_units)  // one attention block per kv-head at least
    return str("at most ", info.compute_units, " kv-heads (one block per SM), got ", s.NKV);
  const int grid = stack_grid(s, layers[0].qkv.w.dtype());
  if (ring_slots(s, grid) < kMinSlots)
    return str("room for ", kMinSlots, " ring slots of ", kChunk, " B next to ", x_region_bytes(s, grid),
               " B of activations (", grid, " blocks) in ", info.smem_per_block_optin,
               " B of shared memory per block");
  if (dtype_is_fp8(layers[0].qkv.w.dtype())) {  // the driver takes the tile maps (checked on one weight)
    alignas(64) unsigned char map[128];
    const std::string e = encode_weight_map(map, layers[0].qkv.w);
    if (!e.empty()) return str("a tensor map of the FP8 weights (", e, ")");
  }
  return "";
}

DecodeStack::DecodeStack(const DecodeStackShape& s, const std::vector<DecodeStackLayer>& layers,
                         const Tensor& inv_freq, Tensor* shared_tiles)
    : s_(s), L_(int64_t(layers.size())), inv_freq_(inv_freq) {
  const std::string why = decode_stack_unsupported(s, layers);
  ANVIL_CHECK(why.empty(), "decode_stack", "a model decode_stack supports", why);
  // The hand-offs' 16-bit tags tell this launch's words from the launch before's (decode_stack_gpu.cuh).
  ANVIL_CHECK(L_ <= decode_stack_tags::kMaxLayers, "decode_stack",
              str("at most ", decode_stack_tags::kMaxLayers, " layers"), str(L_, " layers"));
  const Device dev = layers[0].qkv.w.device();
  wdt_ = layers[0].qkv.w.dtype();
  grid_ = stack_grid(s, wdt_);
  Tmax_ = layers[0].k_cache.size(1);
  std::vector<Layer> host(static_cast<size_t>(L_));
  for (size_t l = 0; l < layers.size(); l++) {
    const DecodeStackLayer& d = layers[l];
    const DecodeStackWeight* ws[4] = {&d.qkv, &d.o, &d.gate_up, &d.down};
    Layer& h = host[l];
    for (int m = 0; m < 4; m++) {
      h.w[m] = static_cast<const uint8_t*>(ws[m]->w.data_ptr());
      const bool fp8 = dtype_is_fp8(wdt_);
      h.ws[m] = fp8 ? ws[m]->scale.data<float>() : nullptr;
      h.ws_stride[m] = fp8 && ws[m]->scale.numel() > 1 ? 1 : 0;
    }
    h.in_norm = d.in_norm.data<bf16>(), h.post_norm = d.post_norm.data<bf16>();
    h.in_gmax = abs_max(d.in_norm), h.post_gmax = abs_max(d.post_norm);
    h.kc = d.k_cache.data<bf16>(), h.vc = d.v_cache.data<bf16>();
  }
  if (dtype_is_fp8(wdt_)) {  // tile maps of every FP8 weight, 128 B each, on the device next to the table
    Tensor maps = Tensor::zeros({L_ * 4 * 128}, DType::u8, Device::cpu());
    for (size_t l = 0; l < layers.size(); l++) {
      const Tensor* ws[4] = {&layers[l].qkv.w, &layers[l].o.w, &layers[l].gate_up.w, &layers[l].down.w};
      for (int m = 0; m < 4; m++) {
        const std::string e = encode_weight_map(maps.data<uint8_t>() + (l * 4 + m) * 128, *ws[m]);
        ANVIL_CHECK(e.empty(), "decode_stack", "a tensor map of every FP8 weight", str("layer ", l, ": ", e));
      }
    }
    tmaps_ = maps.to(dev);
    for (size_t l = 0; l < layers.size(); l++)
      for (int m = 0; m < 4; m++) host[l].tmap[m] = tmaps_.data<uint8_t>() + (l * 4 + m) * 128;
    tiles_ = pretile(s, L_, grid_, host, dev, shared_tiles);
  }
  Tensor bytes = Tensor::empty({int64_t(host.size() * sizeof(Layer))}, DType::u8, Device::cpu());
  std::memcpy(bytes.data_ptr(), host.data(), host.size() * sizeof(Layer));
  table_ = bytes.to(dev);
  // Rows per attention split at least: ANVIL_DECODE_STACK_ATTN_ROWS, for A/B timing.
  attn_rows_ = ring_knob("ANVIL_DECODE_STACK_ATTN_ROWS", 1, 1 << 20, kAttnRows);
  max_splits_ = std::max<int64_t>(1, std::min<int64_t>(grid_ / s.NKV, (Tmax_ + attn_rows_ - 1) / attn_rows_));
  scratch_ = Tensor::zeros({Scratch(s, max_splits_, grid_).bytes}, DType::u8, dev);
  counters_ = Tensor::zeros({2 + s.NKV + kCounts}, DType::i32, dev);
}

void DecodeStack::run(const Tensor& start, Tensor& h0, Tensor& h1, Tensor& branch) const {
  const char* op = "decode_stack";
  for (const Tensor* t : {&h0, &h1, &branch}) {
    check_shape(op, "h0/h1/branch", *t, {1, s_.C});
    check_dtype(op, "h0/h1/branch", *t, DType::bf16);
    check_contiguous(op, "h0/h1/branch", *t);
    ANVIL_CHECK(gpu::aligned16(t->data_ptr()), op, "16-byte aligned h0, h1, branch", t->describe());
  }
  check_shape(op, "start", start, {1});
  check_dtype(op, "start", start, DType::i32);
  const int64_t QD = s_.NH * s_.HD, KVD = s_.NKV * s_.HD, G = s_.NH / s_.NKV;
  const int grid = grid_;  // blocks: one per SM at most (stack_grid)
  Params p{};
  p.layers = reinterpret_cast<const Layer*>(table_.data_ptr());
  p.L = int(L_), p.C = int(s_.C), p.NH = int(s_.NH), p.NKV = int(s_.NKV), p.H = int(s_.H);
  p.QD = int(QD), p.KVD = int(KVD), p.Tmax = int(Tmax_);
  // Ring slots: all that fit, or fewer with ANVIL_DECODE_STACK_SLOTS (for measuring how the bytes in flight per SM
  // trade overlap against the latency of the small reads queued behind them).
  const bool fp8 = dtype_is_fp8(wdt_);
  const int fit = ring_slots(s_, grid);
  p.slots = ring_knob("ANVIL_DECODE_STACK_SLOTS", kMinSlots, fit, fit);
  // The producer's hold before each hand-off's reads (hold_seq): two thirds of the ring (8 of 12 slots: 6-8 measured
  // alike), or ANVIL_DECODE_STACK_HOLD=n chunks; n = slots never holds (the chunk after the ring's first fill waits
  // for the staging anyway).
  p.hold = ring_knob("ANVIL_DECODE_STACK_HOLD", 0, p.slots, p.slots * 2 / 3);
  // FP8 copies at least this many SM cycles apart (produce() says why), or ANVIL_DECODE_STACK_PACE=n (and
  // ANVIL_DECODE_STACK_PACE_HELD=n for the chunks before a hold); 0 unpaced.
  p.pace = ring_knob("ANVIL_DECODE_STACK_PACE", 0, 100000, kFp8PaceCycles * grid / kFp8PaceGrid);
  p.pace_held = ring_knob("ANVIL_DECODE_STACK_PACE_HELD", 0, 100000, kFp8PaceHeldCycles * grid / kFp8PaceGrid);
  const XRegion xr = x_region(s_, grid);
  p.x_bytes = xr.bytes, p.part_offset = xr.part_offset, p.part_floats = xr.part_floats;
  p.max_splits = int(max_splits_), p.attn_rows = attn_rows_;
  // A block per q-head when the context takes one split (attn_split says why); ANVIL_DECODE_STACK_HEAD_SPLIT=0: a
  // block per kv-head.
  p.head_split = ring_knob("ANVIL_DECODE_STACK_HEAD_SPLIT", 0, 1, 1);
  p.eps = s_.eps, p.scale_log2 = s_.attn_scale * 1.4426950408889634f;
  // Weights leave L2 first, so the activations and KV cache the bubbles read stay in it. H200, 8B shape, batch 1,
  // two runs each: bf16 4.348 / 4.363 -> 4.236 / 4.236 ms/token, FP8 3.082 / 3.106 -> 3.033 / 3.035; the trace
  // put the layer at 122.3 -> 118.1 µs, from the norm, staging and attention phases and the barrier waits.
  // ANVIL_DECODE_STACK_L2=normal copies them with the default policy (for A/B).
  const char* l2 = std::getenv("ANVIL_DECODE_STACK_L2");
  p.l2_first = !(l2 && std::strcmp(l2, "normal") == 0);
  p.h0 = h0.data<bf16>(), p.h1 = h1.data<bf16>(), p.branch = branch.data<bf16>();
  uint8_t* sb = static_cast<uint8_t*>(scratch_.data_ptr());
  const Scratch sl(s_, max_splits_, grid);
  p.qkv = reinterpret_cast<uint32_t*>(sb + sl.qkv), p.att = reinterpret_cast<uint32_t*>(sb + sl.att);
  p.gu = reinterpret_cast<uint32_t*>(sb + sl.gu), p.tb = reinterpret_cast<uint32_t*>(sb + sl.tb);
  p.part = reinterpret_cast<float*>(sb + sl.part), p.hp = reinterpret_cast<bf16*>(sb + sl.hp);
  p.counters = reinterpret_cast<unsigned*>(counters_.data_ptr());
  p.inv_freq = inv_freq_.data<float>(), p.start = start.data<int32_t>();
  const KernelFn k = fp8 ? pick<1>(int(s_.HD), int(G)) : pick<2>(int(s_.HD), int(G));
  const size_t smem = size_t(p.slots) * kChunk + size_t(p.x_bytes) + kMiscBytes;
  ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(k), gpuFuncAttributeMaxDynamicSharedMemorySize,
                                      int(smem)));
  Tensor trace;
  if (decode_stack_tracing()) {
    trace = Tensor::empty({(L_ * kStamps + 1) * grid}, DType::i64, h0.device());
    p.trace = reinterpret_cast<unsigned long long*>(trace.data_ptr());
  }
  gpu::EventHandle ev[2] = {nullptr, nullptr};
  if (trace.defined()) {
    ev[0] = gpu::event_create(), ev[1] = gpu::event_create();
    gpu::event_record(ev[0], gpu::current_stream());
  }
  chunk_trace::begin();
  ANVIL_GPU_CHECK(gpu::vendor::launch_cooperative(k, dim3(unsigned(grid)), dim3(kThreads), smem, gpu::stream(), p));
  chunk_trace::end(grid);
  if (trace.defined()) {
    gpu::event_record(ev[1], gpu::current_stream());
    Tensor host = trace.to(Device::cpu());
    const double us = 1e3 * double(gpu::event_elapsed_ms(ev[0], ev[1]));
    gpu::event_destroy(ev[0]), gpu::event_destroy(ev[1]);
    decode_stack_trace::print(host, int(L_), grid, us);
  }
}

#else  // no bulk copies in this vendor build: the models keep their per-op step

std::string decode_stack_unsupported_gpu(const DecodeStackShape&, const std::vector<DecodeStackLayer>&) {
  return "bulk global-to-shared copies (CUDA sm_90+); this build's GPU vendor has none";
}
DecodeStack::DecodeStack(const DecodeStackShape&, const std::vector<DecodeStackLayer>&, const Tensor&, Tensor*) {
  ANVIL_THROW("decode_stack", "a CUDA build (bulk copies)", "a build without them");
}
void DecodeStack::run(const Tensor&, Tensor&, Tensor&, Tensor&) const {
  ANVIL_THROW("decode_stack", "a CUDA build (bulk copies)", "a build without them");
}

#endif

}  // namespace anvil
