// What the kernels that stream weights through a shared-memory ring of bulk copies share (sm_90's copy engine):
// decode_stack (every layer of a batch-1 decode step in one launch) and the ring skinny GEMM
// (kernels/skinny_gemm/skinny_gemm_ring.cu). A producer lane starts one tiled copy per 16 KB chunk into a ring
// slot with a "full" and an "empty" mbarrier; consumer warps wait for the chunk, read it, and the last one
// releases the slot. CUDA only: included where ANVIL_HAS_BULK_COPY is set.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "backends/gpu/common.cuh"
#include "backends/gpu/ring_layout.h"

#ifdef ANVIL_HAS_BULK_COPY
namespace anvil::gpu::ring {

constexpr int kChunk = 16384;    // bytes per ring slot
constexpr int kTileRows = 16;    // weight rows per tile: the MMA's m
constexpr int kTileBytes = kChunk / kTileRows;  // bytes of each row per tile: 8 lines of 128
static_assert(kChunk == ring_layout::kChunkBytes && kTileRows == ring_layout::kTileRows &&
                  kTileBytes == ring_layout::kPieceBytes,
              "the pre-tiled copy's chunks are the ring's");

// Byte offset in a tile slot of row r, byte k of the row's 1024 (k a multiple of 16). The tile lands as
// [128-byte line k / 128][row][128 B] under the 128-byte swizzle: the 16-byte chunk (k / 16) % 8 of line
// (k / 128) * 16 + r sits at chunk ((k / 16) % 8) ^ (r % 8), so rows 4 apart read at the same k fall on disjoint
// banks. The slot is 1024-byte aligned (the swizzle's period).
__device__ __forceinline__ int tile_offset(int r, int k) {
  return (((k >> 7) * kTileRows + r) << 7) + ((((k >> 4) & 7) ^ (r & 7)) << 4);
}

// ---- bounded waits ------------------------------------------------------------------------------------------
// Every wait gives up after gpu::kWaitCycles (common.cuh), reports where it waited and traps.
static __device__ __noinline__ void wait_failed(const char* what, unsigned a, unsigned b) {
  printf("anvil: block %d thread %d gave up waiting on %s (%u, %u)\n", int(blockIdx.x), int(threadIdx.x), what, a,
         b);
  __trap();
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity, const char* what, unsigned chunk) {
  if (anvil_mbar_try_wait(bar, parity)) return;
  const long long t0 = clock64();
  while (!anvil_mbar_try_wait(bar, parity))
    if (clock64() - t0 > kWaitCycles) wait_failed(what, chunk, parity);
}

// A consumer's wait for chunk `chunk` = use `use` of ring slot `slot`. The full barrier's parity alone cannot
// tell use k from use k + 2: a warp that runs ahead (warp 0 wants chunk 16 = use 1 of slot 4 while chunk 4 = use
// 0 is still in flight for warp 4) would find "parity 1 complete" (the phase before the first) and read a slot
// still being filled. So the producer publishes in `issued[slot]` which use it last started, and a consumer
// first waits for its own use to be the slot's current one; from there the parity is unambiguous.
__device__ __forceinline__ void wait_chunk(volatile unsigned* issued, uint64_t* full, unsigned slot, unsigned use,
                                           unsigned chunk) {
  if (issued[slot] != use) {
    const long long t0 = clock64();
    while (issued[slot] != use)
      if (clock64() - t0 > kWaitCycles) wait_failed("a chunk to be issued", chunk, issued[slot]);
  }
  mbar_wait(&full[slot], use & 1u, "a full slot", chunk);
}

// The producer's side: waits until use `use` of `slot` may start (use 0: the slot starts empty), then marks
// the full barrier to expect `bytes` of copies. The caller starts the copies, then publishes `use`.
__device__ __forceinline__ void claim_slot(uint64_t* full, uint64_t* empty, unsigned slot, unsigned use,
                                           unsigned bytes, unsigned chunk) {
  mbar_wait(&empty[slot], (use & 1u) ^ 1u, "an empty slot", chunk);
  anvil_mbar_arrive_expect(&full[slot], bytes);
}

// A consumer warp is done with a chunk read by `readers` warps: the last of them releases the slot. `done` is a
// shared counter per slot; it is zeroed before the release so the slot's next use counts from zero.
__device__ __forceinline__ void release_slot(volatile unsigned* done, uint64_t* empty, unsigned slot,
                                             unsigned readers) {
  __syncwarp();
  if (threadIdx.x % kWarpSize == 0 && atomicAdd(const_cast<unsigned*>(&done[slot]), 1u) == readers - 1) {
    done[slot] = 0;
    anvil_mbar_arrive(&empty[slot]);
  }
}

// ---- host --------------------------------------------------------------------------------------------------
// The tile map of a weight (N rows of row_bytes bytes, row_bytes a multiple of 128, base 16-byte aligned): 8-byte
// elements, dims (16, N, row_bytes / 128) with strides (row_bytes, 128) bytes, so a (16, 16, 8) box is rows
// [r, r + 16) x bytes [128 b, 128 (b + 8)) laid out as [line][row][128 B], 128-byte swizzled (tile_offset reads
// it). Out-of-range rows and lines arrive as zeros. Returns an empty string, or the driver's refusal.
inline std::string encode_weight_tiles(void* map128, const void* base, uint64_t N, uint64_t row_bytes) {
  const uint64_t dims[3] = {16, N, row_bytes / 128}, strides[2] = {row_bytes, 128};
  const uint32_t box[3] = {16, uint32_t(kTileRows), uint32_t(kTileBytes / 128)};
  return vendor::encode_tile_map(map128, 3, 8, base, dims, strides, box, true);
}

// ---- pre-tiled copies (weight_ring_pretile.cu) ------------------------------------------------------------------
// Through a tensor map (encode_weight_tiles) a tile is 16 runs of 1 KB, one per weight row (4-28 KB apart), and the
// copy engine moved such chunks slower than a linear 16 KB: ~0.69 against ~0.57 µs per chunk per SM on the H200
// (docs/decode_kernels.md, tenth round). Pre-tiled, block b's tile u, piece i of a matrix is one 16 KB chunk of a
// second copy (ring_layout.h: pretiled_chunk), laid out as a ring slot holds it, and one linear bulk copy moves it.
// The cost is that copy: ~3% more bytes than the matrix (the shares round up to whole tiles).
// Writes the copy of w (N rows of row_bytes bytes, 16-byte aligned, row_bytes a multiple of 16) for a grid of
// `grid` blocks into out (ring_layout::pretiled_bytes(N, row_bytes, grid) bytes); launches on the current stream.
void pretile(const void* w, int N, int64_t row_bytes, int grid, uint8_t* out);

}  // namespace anvil::gpu::ring
#endif  // ANVIL_HAS_BULK_COPY
