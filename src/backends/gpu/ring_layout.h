// Where the kernels that stream weights through a ring of 16 KB chunks (backends/gpu/weight_ring.cuh: decode_stack
// and the ring skinny GEMM) share a matrix's rows among their blocks, and where a pre-tiled copy of the matrix
// keeps a block's tiles (weight_ring.cuh has why; weight_ring_pretile.cu writes it). Host and device, so a CPU
// test checks that the copy holds every row of every share exactly once and that no two chunks overlap.
#pragma once
#include <cstdint>

#include "core/dtype.h"  // ANVIL_HD

namespace anvil::ring_layout {

constexpr int kTileRows = 16;     // weight rows per tile (the MMA's m)
constexpr int kPieceBytes = 1024; // bytes of each row per tile (1024 FP8 or 512 16-bit columns): one 16 KB chunk
constexpr int kChunkBytes = kTileRows * kPieceBytes;

// Block b's rows of a matrix of N rows are [share_start(N, b, grid), share_start(N, b + 1, grid)).
ANVIL_HD int share_start(int N, int b, int grid) { return int(int64_t(N) * b / grid); }
// Tiles of the largest share: every block's share of the pre-tiled copy takes this many.
ANVIL_HD int tiles_per_block(int N, int grid) { return ((N + grid - 1) / grid + kTileRows - 1) / kTileRows; }
// Pieces of kPieceBytes in a row of row_bytes bytes.
ANVIL_HD int pieces_per_row(int64_t row_bytes) { return int((row_bytes + kPieceBytes - 1) / kPieceBytes); }
// The 16 KB chunk of the copy that holds block b's tile u (rows share_start + 16 u ..), piece i (bytes 1024 i ..
// of each row), of a matrix with ppr pieces a row; the copy has grid * tiles_per_block * ppr chunks.
ANVIL_HD int64_t pretiled_chunk(int N, int ppr, int grid, int b, int u, int i) {
  return (int64_t(b) * tiles_per_block(N, grid) + u) * ppr + i;
}
// Bytes of the pre-tiled copy of a matrix of N rows of row_bytes bytes.
ANVIL_HD int64_t pretiled_bytes(int N, int64_t row_bytes, int grid) {
  return int64_t(grid) * tiles_per_block(N, grid) * pieces_per_row(row_bytes) * kChunkBytes;
}

// How the ring cuts a matrix of N rows: units of rpc rows (the last unit of a share may be partly empty, and is
// still one or more whole chunks), each unit ppr chunks. The ring skinny GEMM and decode_stack's FP8 phases: tiles
// of kTileRows rows in pieces_per_row pieces; decode_stack's 16-bit phases: whole rows packed into a chunk, or a
// row in pieces (decode_stack_gpu.cuh, plan_of).
struct Cut {
  int N, rpc, ppr;
};
struct Reads {
  int64_t total = 0;
  int most = 0;
};
// The chunks a grid's blocks read of the matrix in all (padding included), and the most one block reads. The
// shares are N / grid rows or one more, the longer ones N % grid of them, so this is O(1). It runs on every launch
// of the ring skinny GEMM, in fit_grid: written as a loop over the blocks it cost ~24 µs of host time a call (one
// or two a launch), which an eager FP8 batch-4 decode step on the H200 paid 129 times (6.93 ms a step against 3.11).
// The loop stays in the test (ring_layout_test.cpp) as the reference.
inline Reads reads_at(const Cut& c, int grid) {
  const int q = c.N / grid, r = c.N % grid;
  const int short_units = (q + c.rpc - 1) / c.rpc, long_units = (q + 1 + c.rpc - 1) / c.rpc;
  Reads out;
  out.total = (int64_t(grid - r) * short_units + int64_t(r) * long_units) * c.ppr;
  out.most = (r > 0 ? long_units : short_units) * c.ppr;
  return out;
}
// The grid of `most` blocks or fewer (down to 7/8 of them) under which the blocks read the fewest chunks of these
// matrices in all, with no block of any matrix reading more than under `most` blocks; ties go to the larger grid.
// Why: with one block per SM the last unit of a share is padded to whole chunks, and every padded byte is still
// read from HBM. Llama-3.1-8B's FP8 layer over 132 blocks reads 13,728 chunks of 16 KB where its weights are
// 13,312 (+3.1%: 217-218 rows of gate in 14 tiles of 16, 31-32 of o in 2); over 128 blocks every share is whole
// tiles. Keeping every block's share from growing keeps the slowest block as it was. H200, FP8 decode, 128 against
// 132 blocks: batch 1 2.34 / 2.39 ms/token (decode_stack's paces re-tuned for 128 blocks), batch 4 2.81 / 2.95,
// batch 16 3.18 / 3.24; gate|up per launch in a graph 31.1 / 32.1 µs (docs/decode_kernels.md, twenty-sixth round).
inline int fit_grid(const Cut* cuts, int n, int most) {
  int best = most;
  int64_t best_total = -1;
  for (int g = most; g >= most - most / 8 && g >= 1; g--) {
    int64_t total = 0;
    bool longer = false;
    for (int m = 0; m < n; m++) {
      const Reads r = reads_at(cuts[m], g);
      total += r.total;
      longer = longer || r.most > reads_at(cuts[m], most).most;  // O(1) each
    }
    if (!longer && (best_total < 0 || total < best_total)) best = g, best_total = total;
  }
  return best;
}

}  // namespace anvil::ring_layout
