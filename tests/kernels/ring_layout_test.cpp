// The weight ring's row shares and the pre-tiled copy's chunk index (backends/gpu/ring_layout.h), which
// decode_stack and the ring skinny GEMM both read: the producer copies chunk pretiled_chunk(N, ppr, grid, b, u, i)
// for block b's tile u, piece i, so two tiles that shared a chunk would feed one block another's weights, and a chunk past the end would read past the copy.
// Checked on the host for the 8B shape's matrices and for uneven ones, over several grid sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/gpu/ring_layout.h"

namespace anvil {
namespace {

using namespace ring_layout;

struct Case {
  int N, K;  // rows, and bytes per row
};
// q|k|v, o, gate (and up), down of Llama-3.1-8B; widths and row counts that leave partial tiles and pieces; fewer
// rows than blocks.
const Case kCases[] = {{6144, 4096}, {4096, 4096}, {14336, 4096}, {4096, 14336}, {640, 1152}, {1152, 640},
                       {1000, 128},  {17, 1024},   {100, 2048}};
const int kGrids[] = {1, 7, 114, 132};

TEST(RingLayout, SharesPartitionTheRows) {
  for (const Case& c : kCases)
    for (int grid : kGrids) {
      EXPECT_EQ(share_start(c.N, 0, grid), 0);
      EXPECT_EQ(share_start(c.N, grid, grid), c.N);
      int most = 0;
      for (int b = 0; b < grid; b++) {
        const int rows = share_start(c.N, b + 1, grid) - share_start(c.N, b, grid);
        ASSERT_GE(rows, 0);
        most = std::max(most, (rows + kTileRows - 1) / kTileRows);
      }
      // Every share fits its tiles_per_block, and the largest needs them all (the copy wastes no whole tile).
      EXPECT_EQ(tiles_per_block(c.N, grid), most) << "N " << c.N << " grid " << grid;
    }
}

TEST(RingLayout, EveryRowAndPieceInExactlyOneChunk) {
  for (const Case& c : kCases)
    for (int grid : kGrids) {
      const int ppr = pieces_per_row(c.K), tpb = tiles_per_block(c.N, grid);
      const int64_t chunks = int64_t(grid) * tpb * ppr;
      EXPECT_EQ(pretiled_bytes(c.N, c.K, grid), chunks * kChunkBytes);
      std::vector<int> used(size_t(chunks), 0);
      std::vector<int> row_seen(size_t(c.N), 0);
      for (int b = 0; b < grid; b++) {
        const int r0 = share_start(c.N, b, grid), r1 = share_start(c.N, b + 1, grid);
        for (int u = 0; u * kTileRows < r1 - r0; u++) {
          for (int r = r0 + u * kTileRows; r < std::min(r1, r0 + (u + 1) * kTileRows); r++) row_seen[size_t(r)]++;
          for (int i = 0; i < ppr; i++) {
            const int64_t k = pretiled_chunk(c.N, ppr, grid, b, u, i);
            ASSERT_GE(k, 0);
            ASSERT_LT(k, chunks) << "N " << c.N << " K " << c.K << " grid " << grid << " block " << b;
            used[size_t(k)]++;
          }
        }
      }
      for (int64_t k = 0; k < chunks; k++) ASSERT_LE(used[size_t(k)], 1) << "chunk " << k << " written twice";
      for (int r = 0; r < c.N; r++) ASSERT_EQ(row_seen[size_t(r)], 1) << "row " << r;
      EXPECT_GE(int64_t(ppr) * kPieceBytes, c.K);
      EXPECT_LT(int64_t(ppr - 1) * kPieceBytes, c.K);
    }
}

// reads_at's closed form against the blocks counted one at a time, as the producers issue their units.
TEST(RingLayout, ReadsAreTheBlocksUnitsSummed) {
  for (const Case& c : kCases)
    for (int rpc : {1, 2, 3, kTileRows})
      for (int grid : {1, 7, 100, 114, 128, 131, 132, 304}) {
        Reads want;
        for (int b = 0; b < grid; b++) {
          const int units = (share_start(c.N, b + 1, grid) - share_start(c.N, b, grid) + rpc - 1) / rpc;
          want.total += int64_t(units) * 3;
          want.most = std::max(want.most, units * 3);
        }
        const Reads got = reads_at({c.N, rpc, 3}, grid);
        EXPECT_EQ(got.total, want.total) << "N " << c.N << " rpc " << rpc << " grid " << grid;
        EXPECT_EQ(got.most, want.most) << "N " << c.N << " rpc " << rpc << " grid " << grid;
      }
}

// The 8B gate's padded chunks over 132 and 128 blocks.
TEST(RingLayout, ReadsCountEveryBlocksUnits) {
  const Cut c{14336, kTileRows, 4};  // 8B gate: 4096 FP8 columns, 4 pieces a row
  const Reads r132 = reads_at(c, 132), r128 = reads_at(c, 128);
  EXPECT_EQ(r132.most, 7 * 4);  // 108-109 rows: 7 tiles
  EXPECT_EQ(r132.total, 132 * 7 * 4);
  EXPECT_EQ(r128.most, 7 * 4);  // 112 rows: 7 whole tiles
  EXPECT_EQ(r128.total, 14336 / kTileRows * 4);
  const Cut rows{100, 3, 2};  // 100 rows over 7 blocks: shares of 14-15 rows, 5 units of 3 rows
  const Reads r = reads_at(rows, 7);
  EXPECT_EQ(r.most, 5 * 2);
  EXPECT_EQ(r.total, 7 * 5 * 2);
}

// Llama-3.1-8B's FP8 layer (q|k|v, o, gate, up, down as tiles of 16 rows by 1024-byte pieces) on 132 SMs: over 128
// blocks every share is whole tiles, 3.1% fewer chunks, and no block reads more.
TEST(RingLayout, FitGridDropsThePaddingOfThe8bLayer) {
  const Cut fp8[] = {{6144, kTileRows, 4}, {4096, kTileRows, 4}, {14336, kTileRows, 4}, {14336, kTileRows, 4},
                     {4096, kTileRows, 14}};
  EXPECT_EQ(fit_grid(fp8, 5, 132), 128);
  int64_t t132 = 0, t128 = 0;
  for (const Cut& c : fp8) t132 += reads_at(c, 132).total, t128 += reads_at(c, 128).total;
  EXPECT_EQ(t132, 13728);
  EXPECT_EQ(t128, 13312);
  // The skinny GEMM's single matrices: gate|up (28672 rows) and q|k|v over 128; the LM head (128256 rows) keeps 132,
  // since fewer blocks would give each one more tile.
  const Cut gate_up{28672, kTileRows, 1}, qkv{6144, kTileRows, 1}, head{128256, kTileRows, 1};
  EXPECT_EQ(fit_grid(&gate_up, 1, 132), 128);
  EXPECT_EQ(fit_grid(&qkv, 1, 132), 128);
  EXPECT_EQ(fit_grid(&head, 1, 132), 132);
  // A grid that already divides evenly stays.
  EXPECT_EQ(fit_grid(fp8, 5, 128), 128);
  // decode_stack's bf16 layer (cut_of<2>: two 8 KB rows a chunk, down's 28 KB rows in two pieces) keeps 132: over
  // 128 blocks gate's 108-109 rows would become 112, 56 chunks a block against 55.
  const Cut bf16[] = {{6144, 2, 1}, {4096, 2, 1}, {14336, 2, 1}, {14336, 2, 1}, {4096, 1, 2}};
  EXPECT_EQ(reads_at(bf16[2], 132).most, 55);
  EXPECT_EQ(reads_at(bf16[2], 128).most, 56);
  EXPECT_EQ(fit_grid(bf16, 5, 132), 132);
}

// Whatever the shapes: the grid is within [most - most / 8, most], no block of any matrix reads more than under
// `most` blocks, and the blocks read no more chunks in all.
TEST(RingLayout, FitGridNeverLengthensAShare) {
  for (int most : {1, 7, 100, 114, 132, 304})
    for (const Case& a : kCases)
      for (const Case& b : kCases) {
        const Cut cuts[] = {{a.N, kTileRows, pieces_per_row(a.K)}, {b.N, 2, 1}};
        const int g = fit_grid(cuts, 2, most);
        ASSERT_LE(g, most);
        ASSERT_GE(g, most - most / 8);
        int64_t total_g = 0, total_most = 0;
        for (const Cut& c : cuts) {
          EXPECT_LE(reads_at(c, g).most, reads_at(c, most).most) << "N " << c.N << " most " << most << " g " << g;
          total_g += reads_at(c, g).total, total_most += reads_at(c, most).total;
        }
        EXPECT_LE(total_g, total_most);
      }
}

}  // namespace
}  // namespace anvil
