// argmax_rows on the GPU: two launches, deterministic.
//   1. grid (S, R): block s of row r scans its span of kSpan columns (float4 loads when the rows allow) and
//      writes one partial: the span's best (value, column) and its first bad code.
//   2. one warp per row folds the row's S partials in column order and writes ids[r] and bad[r].
// Why split a row over blocks: a 128256-wide row is 513 KB; one block reads L2 at ~33 GB/s per SM (the decode
// stack's measured share), ~15 µs, while 32 blocks of 16 KB take ~1-2 µs. The row was just written by the LM
// head, so it comes from L2.
#include <climits>

#include "backends/gpu/common.cuh"
#include "kernels/argmax/argmax.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;
constexpr int kSpan = 4096;  // columns per block: 16 KB of f32, 16 per thread
constexpr int kW = gpu::kWarpSize;

// A candidate: the best finite-or--inf value seen and its column (INT_MAX: none), and the first bad code
// (INT_MAX: none). Columns grow with the scan, so "better" is the larger value, then the lower column.
struct Cand {
  float v;
  int col;
  int bad;
};
__device__ __forceinline__ Cand pick(Cand a, Cand b) {
  Cand r;
  const bool b_wins = b.col != INT_MAX && (a.col == INT_MAX || b.v > a.v || (b.v == a.v && b.col < a.col));
  r.v = b_wins ? b.v : a.v;
  r.col = b_wins ? b.col : a.col;
  r.bad = min(a.bad, b.bad);
  return r;
}
__device__ __forceinline__ void see(Cand& c, float l, int col) {
  if (isnan(l) || l == INFINITY) {
    c.bad = min(c.bad, 2 * col + (isnan(l) ? 0 : 1));
  } else if (l != -INFINITY && (c.col == INT_MAX || l > c.v)) {
    c.v = l;
    c.col = col;
  }
}
__device__ __forceinline__ Cand warp_pick(Cand c) {
#pragma unroll
  for (int o = kW / 2; o > 0; o >>= 1) {
    Cand other;
    other.v = ANVIL_SHFL_XOR(c.v, o, kW);
    other.col = ANVIL_SHFL_XOR(c.col, o, kW);
    other.bad = ANVIL_SHFL_XOR(c.bad, o, kW);
    c = pick(c, other);
  }
  return c;
}

// part: (R, S) candidates. VEC: V % 4 == 0 and the rows 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(kThreads) argmax_part_kernel(const float* __restrict__ x, int V, int S,
                                                               Cand* __restrict__ part) {
  const int r = int(blockIdx.y), s = int(blockIdx.x);
  const float* row = x + int64_t(r) * V;
  const int c0 = s * kSpan, c1 = min(V, c0 + kSpan);
  Cand c{-INFINITY, INT_MAX, INT_MAX};
  if constexpr (VEC) {
    // Each thread's columns grow from one float4 to the next, so its first hit of a value wins its ties.
    for (int i = c0 + 4 * int(threadIdx.x); i < c1; i += 4 * kThreads) {
      const float4 q = *reinterpret_cast<const float4*>(row + i);
      see(c, q.x, i), see(c, q.y, i + 1), see(c, q.z, i + 2), see(c, q.w, i + 3);
    }
  } else {
    for (int i = c0 + int(threadIdx.x); i < c1; i += kThreads) see(c, row[i], i);
  }
  c = warp_pick(c);
  __shared__ Cand ws[kThreads / kW];
  const int warp = int(threadIdx.x) / kW, lane = int(threadIdx.x) % kW;
  if (lane == 0) ws[warp] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    Cand b = ws[0];
    for (int w = 1; w < kThreads / kW; w++) b = pick(b, ws[w]);
    part[int64_t(r) * S + s] = b;
  }
}

__global__ void argmax_fold_kernel(const Cand* __restrict__ part, int R, int S, int V, int32_t* __restrict__ ids,
                                   int32_t* __restrict__ bad) {
  const int r = int(blockIdx.x) * (blockDim.x / kW) + int(threadIdx.x) / kW, lane = int(threadIdx.x) % kW;
  if (r >= R) return;
  Cand c{-INFINITY, INT_MAX, INT_MAX};
  for (int s = lane; s < S; s += kW) c = pick(c, part[int64_t(r) * S + s]);
  c = warp_pick(c);
  if (lane == 0) {
    ids[r] = c.col == INT_MAX ? 0 : c.col;
    bad[r] = c.bad != INT_MAX ? c.bad : (c.col == INT_MAX ? 2 * V : -1);
  }
}

}  // namespace

void argmax_rows_gpu(const Tensor& logits, Tensor& ids, Tensor& bad) {
  const int R = int(logits.size(0)), V = int(logits.size(1));
  const int S = gpu::ceil_div(V, kSpan);
  // Partials through the caching allocator: no device allocation in a steady decode loop.
  Tensor part = Tensor::empty({int64_t(R) * S * int64_t(sizeof(Cand) / sizeof(int32_t))}, DType::i32,
                              logits.device());
  Cand* p = static_cast<Cand*>(part.data_ptr());
  const dim3 grid{unsigned(S), unsigned(R)};
  if (V % 4 == 0 && gpu::aligned16(logits.data_ptr()))
    argmax_part_kernel<true><<<grid, kThreads, 0, gpu::stream()>>>(logits.data<float>(), V, S, p);
  else
    argmax_part_kernel<false><<<grid, kThreads, 0, gpu::stream()>>>(logits.data<float>(), V, S, p);
  ANVIL_LAUNCH_CHECK();
  constexpr int kRowsPerBlock = 4;
  argmax_fold_kernel<<<unsigned(gpu::ceil_div(R, kRowsPerBlock)), kRowsPerBlock * kW, 0, gpu::stream()>>>(
      p, R, S, V, ids.data<int32_t>(), bad.data<int32_t>());
  ANVIL_LAUNCH_CHECK();
}

}  // namespace anvil
