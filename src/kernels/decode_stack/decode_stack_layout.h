// How decode_stack shares each matrix's rows among the blocks, and where the pre-tiled FP8 copy keeps a block's
// tiles (decode_stack_gpu.cuh has why; decode_stack_pretile.cu writes it). Host and device, so a CPU test checks
// that the copy holds every row of every share exactly once and that no two chunks overlap.
#pragma once
#include <cstdint>

#include "core/dtype.h"  // ANVIL_HD

namespace anvil::decode_stack_layout {

constexpr int kTileRows = 16;     // weight rows per FP8 tile (the MMA's m)
constexpr int kTileCols = 1024;   // FP8 columns per tile: one 16 KB ring chunk

// Block b's rows of a matrix of N rows are [share_start(N, b, grid), share_start(N, b + 1, grid)).
ANVIL_HD int share_start(int N, int b, int grid) { return int(int64_t(N) * b / grid); }
// Tiles of the largest share: every block's share of the pre-tiled copy takes this many.
ANVIL_HD int tiles_per_block(int N, int grid) { return ((N + grid - 1) / grid + kTileRows - 1) / kTileRows; }
// Pieces of kTileCols in a row of K columns.
ANVIL_HD int pieces_per_row(int K) { return (K + kTileCols - 1) / kTileCols; }
// The 16 KB chunk of the copy that holds block b's tile u (rows share_start + 16 u ..), piece i (columns
// 1024 i ..), of a matrix with ppr pieces a row; the copy has grid * tiles_per_block * ppr chunks.
ANVIL_HD int64_t pretiled_chunk(int N, int ppr, int grid, int b, int u, int i) {
  return (int64_t(b) * tiles_per_block(N, grid) + u) * ppr + i;
}

}  // namespace anvil::decode_stack_layout
