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

}  // namespace
}  // namespace anvil
