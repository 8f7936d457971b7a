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

}  // namespace anvil::ring_layout
