// decode_stack's pre-tiled FP8 weights: each block's tiles of every matrix as 16 KB chunks in ring-slot layout,
// so the producer moves each with one linear bulk copy (why: backends/gpu/weight_ring.cuh).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/gpu/common.cuh"
#include "kernels/decode_stack/decode_stack_gpu.cuh"

namespace anvil::decode_stack_gpu {

#ifdef ANVIL_HAS_BULK_COPY
namespace {

// Rows and columns of the stream's five matrices (mat_of's order: q|k|v, o, gate, up, down).
void mat_dims(const DecodeStackShape& s, int64_t (&N)[kMats], int64_t (&K)[kMats]) {
  const int64_t QD = s.NH * s.HD, KVD = s.NKV * s.HD;
  const int64_t n[kMats] = {QD + 2 * KVD, s.C, s.H, s.H, s.C}, k[kMats] = {s.C, QD, s.C, s.C, s.H};
  for (int m = 0; m < kMats; m++) N[m] = n[m], K[m] = k[m];
}
int64_t mat_bytes(int64_t N, int64_t K, int grid) { return ring_layout::pretiled_bytes(int(N), K, grid); }

}  // namespace

int fit_stack_grid(const DecodeStackShape& s, int ES, int sms) {
  int64_t N[kMats], K[kMats];
  mat_dims(s, N, K);
  ring_layout::Cut cuts[kMats];
  for (int m = 0; m < kMats; m++) {
    const Cut c = ES == 1 ? cut_of<1>(int(K[m])) : cut_of<2>(int(K[m]));
    cuts[m] = {int(N[m]), c.rpc, c.ppr};
  }
  return std::max(int(s.NKV), ring_layout::fit_grid(cuts, kMats, sms));
}

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
      if (write) gpu::ring::pretile(src[m], int(N[m]), K[m], grid, dst);
      h.tiled[m] = dst;
      dst += mat_bytes(N[m], K[m], grid);
    }
  }
}
#endif  // ANVIL_HAS_BULK_COPY

}  // namespace anvil::decode_stack_gpu
