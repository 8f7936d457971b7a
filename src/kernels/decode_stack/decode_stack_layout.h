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

// ---- FP8 down split over its columns (decode_stack_gpu.cuh has why) ------------------------------------------------
// Block b takes every row of down (C rows, H columns) but only its own columns, which are its rows of gate and up:
// [share_start(H, b, grid), + its width), in units of kKsUnit columns (the MMA's k; the last unit zero-padded). A
// row group is kTileRows rows of down (the MMA's m) and is stored in the order one warp loads it: step j holds units
// 4j .. 4j + s - 1 (s = 4, or what is left in the last step), first the lanes' 16-byte runs of rows g = 0..7, then
// those of rows g + 8, lane (g, t) at (g s + t) 16, so every warp load is one contiguous run (no bank conflicts).
constexpr int kKsUnit = 16;
constexpr int kKsGroupUnitBytes = kKsUnit * kTileRows;  // one unit of a row group: 256 bytes
ANVIL_HD int ks_units(int H, int b, int grid) {
  return (share_start(H, b + 1, grid) - share_start(H, b, grid) + kKsUnit - 1) / kKsUnit;
}
// Units of the widest block (every block's share of the copy takes this many per row group).
ANVIL_HD int ks_units_max(int H, int grid) { return ((H + grid - 1) / grid + kKsUnit - 1) / kKsUnit; }
ANVIL_HD int ks_groups(int C) { return (C + kTileRows - 1) / kTileRows; }
// Row groups per 16 KB ring chunk (0 when a block's columns are too wide for one chunk: no split then).
ANVIL_HD int ks_groups_per_chunk(int units) { return kTileRows * kTileCols / (units * kKsGroupUnitBytes); }
ANVIL_HD int64_t ks_block_offset(int C, int H, int grid, int b) {
  return int64_t(b) * ks_groups(C) * ks_units_max(H, grid) * kKsGroupUnitBytes;
}
ANVIL_HD int64_t ks_bytes(int C, int H, int grid) { return ks_block_offset(C, H, grid, grid); }
// The chunk block b copies and multiplies first (then the next ones, wrapping): spread over the chunks, so the
// blocks add to different outputs at a time.
ANVIL_HD int ks_first_chunk(int chunks, int b, int grid) { return int(int64_t(chunks) * b / grid); }
// Byte offset in a row group of `units` units of lane (g, t)'s run of step j, rows g (hi false) or g + 8.
ANVIL_HD int ks_lane_offset(int units, int j, int g, int t, bool hi) {
  const int s = units - 4 * j < 4 ? units - 4 * j : 4;
  return j * 4 * kKsGroupUnitBytes + (hi ? s * 8 * kKsUnit : 0) + (g * s + t) * kKsUnit;
}

}  // namespace anvil::decode_stack_layout
