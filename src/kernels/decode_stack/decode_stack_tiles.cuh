// FP8 GEMM of decode_stack (decode_stack.cu) on the tensor cores: tiles of 16 weight rows x 1024 columns from the
// ring, m16n8k16 MMAs, and the quarter-warp groups' sums. CUDA only (bulk copies, tensor maps): included where
// ANVIL_HAS_BULK_COPY is set.
#pragma once
#include "kernels/decode_stack/decode_stack_chunk_trace.cuh"
#include "kernels/decode_stack/decode_stack_gpu.cuh"

#ifdef ANVIL_HAS_BULK_COPY
namespace anvil::decode_stack_gpu {

// One step of a lane: 16 columns of rows pr and pr + 8 (w: row pr's 16 bytes; row pr + 8's are 8 rows = 1024 bytes
// on, the same swizzle chunk since (pr + 8) % 8 = pr % 8), times x's 16 f16 at xs, into the 4 quads' sums.
__device__ __forceinline__ void tile_step(const uint8_t* w, const uint8_t* xs, float (&d)[4][4]) {
  const uint4 wlo = *reinterpret_cast<const uint4*>(w);
  const uint4 whi = *reinterpret_cast<const uint4*>(w + 8 * 128);
  const uint4 x0 = *reinterpret_cast<const uint4*>(xs);
  const uint4 x1 = *reinterpret_cast<const uint4*>(xs + 16);
  const uint32_t wl[4] = {wlo.x, wlo.y, wlo.z, wlo.w}, wh[4] = {whi.x, whi.y, whi.z, whi.w};
  const uint32_t xx[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
  for (int q = 0; q < 4; q++) {
    uint32_t a[4];
#ifdef ANVIL_HAS_E4M3_CVT
    anvil_e4m3x4_to_f16x2(wl[q], a[0], a[2]);
    anvil_e4m3x4_to_f16x2(wh[q], a[1], a[3]);
#else
    __trap();  // never launched: decode_stack needs sm_90
#endif
    const uint32_t b[2] = {xx[2 * q], xx[2 * q + 1]};
    anvil_mma16816<false>(d[q], a, b);
  }
}

// FP8 y[rows of this block] = x @ w^T on the tensor cores (mma.m16n8k16, f16 in, f32 sums). Why: decoding FP8 to
// f32 for FMAs cost ~4 instructions per weight and those phases ran consumer-bound at 3.0-3.5 TB/s.
// Fragments (as skinny_gemm_mma.cu, with one activation row): A is a tile of 16 weight rows, B is x^T. Lane (g, t)
// takes columns k = 16t + 64j (16 of them) of rows g and g + 8; its quad q (columns 4q..4q+3 of the 16) is one
// MMA's k slice (the k order inside an MMA is free as long as A and B agree): A's k 2t, 2t+1 hold columns 4q, 4q+1
// and k 2t+8, 2t+9 hold 4q+2, 4q+3, so each cvt.e4m3x2 result is an A register as it is; B's registers are x's
// f16 pairs of the same columns, two consecutive words of one 16-byte load (B's columns 1-7, other activation
// rows, are don't-cares: every lane loads x). Per 16 weights a lane issues 1/2 + 1/2 + ~1 shared loads, 8
// conversions and 2 MMAs, with no register moves or selects. D's column 0 is the output: lane (g, 0) holds rows
// g and g + 8. x is staged as f16 times a power of two (xinv undoes it; see stage_norm) and e4m3 converts to f16
// exactly, so the products are exact and only the order of the f32 sums differs from the per-op GEMM.
// Work: the 12 warps are 3 groups of 4; group G takes tiles G, G + 3, ..., and its warp s a quarter of every
// piece's columns (4 steps of 64 at the 8B shape), so 3 chunks are in work at once, each done in ~1/4 of a warp's
// time. Pieces are whole 128-column blocks (the weights' widths are multiples of 128), so every step is full.
// The quarters' sums meet in `part` (double-buffered by GEMM parity: no block barrier between gate and up) in a
// fixed order after a group barrier, so the result does not depend on timing.
template <class O>
__device__ void gemm_tiles(const Params& p, const Mat& m, const float* ws, int ws_stride, const uint8_t* ring,
                           uint64_t* full, uint64_t* empty, volatile unsigned* issued, volatile unsigned* done,
                           const bf16* x, float xinv, float* part, int g0, O y, unsigned& c) {
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW, g = lane / 4, t = lane % 4;
  const int grp = warp / kTileQuarters, s = warp % kTileQuarters;
  // The MMA's rows g and g + 8 are the tile's rows pr and pr + 8, pr = g / 2 + 4 (g % 2): a quarter-warp's two g
  // then read rows 4 apart, whose 128-byte swizzles (row % 8) put their 64 bytes on disjoint banks.
  const int pr = (g >> 1) | ((g & 1) << 2);
  constexpr int qw = kTileK / kTileQuarters;  // columns per quarter
  // A whole quarter's steps j read columns k = s qw + 16 t + 64 j: line s qw / 128 + j / 2, swizzle chunk
  // (t + 4 (j % 2)) ^ (pr % 8) (tile_offset), so at oa + (j / 2) kLineRows (j even) or ob + the same (j odd).
  static_assert(qw % 128 == 0, "a quarter is whole 128-byte lines");
  constexpr int kSteps = qw / 64, kLineRows = kTileRows * 128;
  const int oa = tile_offset(pr, s * qw + 16 * t), ob = oa ^ 64;
  const Plan pl = plan_of<1>(m);
  const int rows = pl.r1 - pl.r0;
  // Group (g0 + u) % 3 takes tile u whole (g0 carries the rotation from gate into up: 7 + 7 tiles are 5, 5, 4 per
  // group, not 6, 4, 4). With fewer tiles than groups (o and down at the 8B shape: 31 rows, 2 tiles; one group per
  // tile left a third of the warps idle and down's last warp 5.6 µs behind its first) each group takes a third of
  // every tile's pieces instead, and the 12 warps' sums meet after a block barrier.
  const bool split = pl.units < kTileGroups;
  const int u0 = split ? 0 : ((grp - g0) % kTileGroups + kTileGroups) % kTileGroups;
  const int ia = split ? pl.ppr * grp / kTileGroups : 0, ib = split ? pl.ppr * (grp + 1) / kTileGroups : pl.ppr;
  for (int u = u0; u < pl.units; u += split ? 1 : kTileGroups) {
    float d[4][4] = {};  // one accumulator per quad: 4 independent MMA chains
    for (int i = ia; i < ib; i++) {
      const unsigned cc = c + unsigned(u * pl.ppr + i), slot = cc % unsigned(p.slots);
      if (s == 0 && lane == 0) chunk_trace::stamp(cc, 3);
      wait_chunk(issued, full, slot, cc / unsigned(p.slots), cc);
      if (s == 0 && lane == 0) chunk_trace::stamp(cc, 4);
      const int k0 = i * pl.pe, ke = min(min(pl.pe, m.K - k0), (s + 1) * qw);
      const uint8_t* wr = ring + size_t(slot) * kChunk;
      const uint8_t* xr = reinterpret_cast<const uint8_t*>(x + k0);
      if (ke - s * qw == qw) {
        // A whole quarter (every piece of the 8B shape's matrices): its four steps' addresses are the two
        // per-thread offsets plus constants (tile_step).
#pragma unroll
        for (int j = 0; j < kSteps; j++)
          tile_step(wr + (j & 1 ? ob : oa) + (j >> 1) * kLineRows, xr + 2 * (s * qw + 16 * t) + 128 * j, d);
      } else {
        // Unrolled twice; loading 2-4 steps into arrays before any MMA spilled at the 128-register cap.
#pragma unroll 2
        for (int k = s * qw + 16 * t; k < ke; k += 64)
          tile_step(wr + tile_offset(pr, k), xr + 2 * k, d);
      }
      if (lane == 0) chunk_trace::stamp_last(cc, 5);
      release_slot(done, empty, slot, kTileQuarters);
    }
    const int row = u * kTileRows + pr;  // within the block's rows; and row + 8
    float* mine = part + (split ? grp * kTileQuarters + s : s) * rows;  // part[s][row], split: part[grp][s][row]
    if (t == 0) {
      if (row < rows) mine[row] = d[0][0] + d[1][0] + d[2][0] + d[3][0];
      if (row + 8 < rows) mine[row + 8] = d[0][2] + d[1][2] + d[2][2] + d[3][2];
    }
    if (split) continue;
    anvil_bar_sync(kBarTileGroup0 + grp, kTileQuarters * kW);
    if (s == 0 && t == 0) {
#pragma unroll
      for (int e = 0; e < 16; e += 8) {
        if (row + e >= rows) break;
        const float* q = part + row + e;
        const float acc = ((q[0] + q[rows]) + (q[2 * rows] + q[3 * rows])) * xinv;
        const int r = pl.r0 + row + e;
        y.put(r, ws ? acc * ws[int64_t(r) * ws_stride] : acc);
      }
    }
  }
  if (split) {
    consumer_sync();
    for (int r = threadIdx.x; r < rows; r += kConsumers) {
      float acc = 0.f;
#pragma unroll
      for (int q = 0; q < kTileGroups * kTileQuarters; q++) acc += part[q * rows + r];
      acc *= xinv;
      y.put(pl.r0 + r, ws ? acc * ws[int64_t(pl.r0 + r) * ws_stride] : acc);
    }
  }
  c += unsigned(pl.units * pl.ppr);
}

}  // namespace anvil::decode_stack_gpu

#endif  // ANVIL_HAS_BULK_COPY
