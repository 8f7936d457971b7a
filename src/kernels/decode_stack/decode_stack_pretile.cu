// decode_stack's pre-tiled FP8 weights: each block's tiles of every matrix as 16 KB chunks in ring-slot layout,
// so the producer moves each with one linear bulk copy (why, and the layout: decode_stack_gpu.cuh).
#include <cstdint>
#include <vector>

#include "backends/gpu/common.cuh"
#include "kernels/decode_stack/decode_stack_gpu.cuh"

namespace anvil::decode_stack_gpu {

#ifdef ANVIL_HAS_BULK_COPY
namespace {

// One block per chunk (grid blocks x tpb tiles x ppr pieces); thread j copies 16-byte packs j, j + 256, ...: pack
// q is row q / 64 of the tile, bytes 16 (q % 64) of its 1024, read along the row (coalesced) and stored where the
// slot's swizzle puts it. w: (N, K) e4m3 bytes, K a multiple of 16.
__global__ void pretile_kernel(const uint8_t* w, int N, int K, int grid, int ppr, uint8_t* out) {
  const int tpb = tiles_per_block(N, grid);
  const int64_t chunk = blockIdx.x;
  const int b = int(chunk / (int64_t(tpb) * ppr)), u = int(chunk / ppr % tpb), i = int(chunk % ppr);
  const int r1 = share_start(N, b + 1, grid);
  uint8_t* dst = out + pretiled_chunk(N, ppr, grid, b, u, i) * kChunk;
  for (int q = threadIdx.x; q < kChunk / 16; q += blockDim.x) {
    const int r = q / (kTileK / 16), k = (q % (kTileK / 16)) * 16;
    const int row = share_start(N, b, grid) + u * kTileRows + r, col = i * kTileK + k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < r1 && col < K) v = *reinterpret_cast<const uint4*>(w + int64_t(row) * K + col);
    *reinterpret_cast<uint4*>(dst + tile_offset(r, k)) = v;
  }
}

// Rows and columns of the stream's five matrices (mat_of's order: q|k|v, o, gate, up, down).
void mat_dims(const DecodeStackShape& s, int64_t (&N)[kMats], int64_t (&K)[kMats]) {
  const int64_t QD = s.NH * s.HD, KVD = s.NKV * s.HD;
  const int64_t n[kMats] = {QD + 2 * KVD, s.C, s.H, s.H, s.C}, k[kMats] = {s.C, QD, s.C, s.C, s.H};
  for (int m = 0; m < kMats; m++) N[m] = n[m], K[m] = k[m];
}
int64_t mat_bytes(int64_t N, int64_t K, int grid) {
  return int64_t(grid) * tiles_per_block(int(N), grid) * decode_stack_layout::pieces_per_row(int(K)) * kChunk;
}

}  // namespace

int64_t pretiled_layer_bytes(const DecodeStackShape& s, int grid) {
  int64_t N[kMats], K[kMats], bytes = 0;
  mat_dims(s, N, K);
  for (int m = 0; m < kMats; m++) bytes += mat_bytes(N[m], K[m], grid);
  return bytes;
}

void pretile_weights(const DecodeStackShape& s, int grid, std::vector<Layer>& host, uint8_t* out, bool write) {
  int64_t N[kMats], K[kMats];
  mat_dims(s, N, K);
  const int64_t layer_bytes = pretiled_layer_bytes(s, grid);
  for (size_t l = 0; l < host.size(); l++) {
    Layer& h = host[l];
    const uint8_t* src[kMats] = {h.w[0], h.w[1], h.w[2], h.w[2] + s.H * s.C, h.w[3]};  // up: gate|up's second half
    uint8_t* dst = out + int64_t(l) * layer_bytes;
    for (int m = 0; m < kMats; m++) {
      const int ppr = decode_stack_layout::pieces_per_row(int(K[m]));
      const int64_t chunks = int64_t(grid) * tiles_per_block(int(N[m]), grid) * ppr;
      if (write) {
        pretile_kernel<<<unsigned(chunks), 256, 0, gpu::stream()>>>(src[m], int(N[m]), int(K[m]), grid, ppr, dst);
        ANVIL_LAUNCH_CHECK();
      }
      h.tiled[m] = dst;
      dst += mat_bytes(N[m], K[m], grid);
    }
  }
}
#endif  // ANVIL_HAS_BULK_COPY

}  // namespace anvil::decode_stack_gpu
