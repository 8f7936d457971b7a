// A matrix pre-tiled for the weight ring (weight_ring.cuh has why; ring_layout.h the indexing): block b's tile u,
// piece i becomes 16 KB chunk pretiled_chunk(N, ppr, grid, b, u, i) of the copy, already in a ring slot's swizzled
// layout (tile_offset), with rows past the block's share and bytes past the row as zeros.
#include <cstdint>

#include "backends/gpu/common.cuh"
#include "backends/gpu/weight_ring.cuh"

namespace anvil::gpu::ring {

#ifdef ANVIL_HAS_BULK_COPY
namespace {

// One block per chunk (grid x tiles_per_block x ppr of them); thread j copies 16-byte packs j, j + 256, ...: pack
// q is row q / 64 of the tile, bytes 16 (q % 64) of its 1024, read along the row (coalesced) and stored where the
// slot's swizzle puts it. w: (N, row_bytes) bytes, row_bytes a multiple of 16, 16-byte aligned.
__global__ void pretile_kernel(const uint8_t* w, int N, int64_t row_bytes, int grid, int ppr, uint8_t* out) {
  const int tpb = ring_layout::tiles_per_block(N, grid);
  const int64_t chunk = blockIdx.x;
  const int b = int(chunk / (int64_t(tpb) * ppr)), u = int(chunk / ppr % tpb), i = int(chunk % ppr);
  const int r0 = ring_layout::share_start(N, b, grid), r1 = ring_layout::share_start(N, b + 1, grid);
  uint8_t* dst = out + ring_layout::pretiled_chunk(N, ppr, grid, b, u, i) * kChunk;
  for (int q = threadIdx.x; q < kChunk / 16; q += blockDim.x) {
    const int r = q / (kTileBytes / 16), k = (q % (kTileBytes / 16)) * 16;
    const int row = r0 + u * kTileRows + r;
    const int64_t col = int64_t(i) * kTileBytes + k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < r1 && col < row_bytes) v = *reinterpret_cast<const uint4*>(w + int64_t(row) * row_bytes + col);
    *reinterpret_cast<uint4*>(dst + tile_offset(r, k)) = v;
  }
}

}  // namespace

void pretile(const void* w, int N, int64_t row_bytes, int grid, uint8_t* out) {
  ANVIL_CHECK(row_bytes % 16 == 0 && aligned16(w), "pretile", "16-byte aligned rows of a multiple of 16 bytes",
              str(row_bytes, " bytes a row"));
  const int64_t chunks = ring_layout::pretiled_bytes(N, row_bytes, grid) / kChunk;
  if (chunks == 0) return;
  pretile_kernel<<<unsigned(chunks), 256, 0, stream()>>>(static_cast<const uint8_t*>(w), N, row_bytes, grid,
                                                         ring_layout::pieces_per_row(row_bytes), out);
  ANVIL_LAUNCH_CHECK();
}
#endif  // ANVIL_HAS_BULK_COPY

}  // namespace anvil::gpu::ring
