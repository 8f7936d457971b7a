// topk_rows on the GPU: two launches, deterministic.
//   1. grid (S, R): block s of row r turns its span of kSpan columns into 64-bit keys (below), sorts them in
//      shared memory (bitonic, descending) and writes its K2 best keys, its count of finite logits and its first
//      bad code. K2 = the power of two >= k: nothing past a span's K2 best can be in the row's k best.
//   2. one block per row merges the S·K2 keys in rounds of kMerge: sort, keep the K2 best at the front, refill
//      the rest with the next keys. Then the k best become (id, logit) pairs.
// A key orders candidates as the host sampler does: the larger logit, then the lower id. Its high word is the
// logit's bits made unsigned-orderable, its low word 0xffffffff - id; 0 is "no candidate" (NaN, +inf, -inf, or
// padding), below every real key. Cost at V = 128256, k = 40: 63 spans of 2048, each sorted in 66
// compare-exchange stages; the merge then sorts only the keys that can still be among the k best (below).
#include <climits>
#include <cstdint>

#include "backends/gpu/common.cuh"
#include "kernels/topk/topk.h"

namespace anvil {
namespace {

constexpr int kThreads = 1024;       // one compare-exchange per thread and stage of a span's sort
constexpr int kSpan = 2048;          // columns per block in launch 1: 16 KB of keys
constexpr int kMerge = 4096;         // keys per merge round in launch 2: 32 KB
constexpr int kMergeThreads = 1024;
constexpr int kW = gpu::kWarpSize;

__device__ __forceinline__ uint64_t key_of(float l, int col, int& finite, int& bad) {
  if (isnan(l) || l == INFINITY) {
    bad = min(bad, 2 * col + (isnan(l) ? 0 : 1));
    return 0;
  }
  if (l == -INFINITY) return 0;
  finite++;
  const uint32_t u = __float_as_uint(l == 0.f ? 0.f : l);  // -0 ties with +0, as on the host
  const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (uint64_t(ord) << 32) | uint64_t(0xffffffffu - uint32_t(col));
}
__device__ __forceinline__ float logit_of(uint64_t key) {
  const uint32_t ord = uint32_t(key >> 32);
  return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord);
}

// Sorts s[0, n) descending; n a power of two; every thread of the block calls it.
__device__ void bitonic_desc(uint64_t* s, int n) {
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = int(threadIdx.x); i < n / 2; i += int(blockDim.x)) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool down = (lo & size) == 0;  // this pair's run ends descending; the last merge is all down
        const uint64_t a = s[lo], b = s[hi];
        if (down ? a < b : a > b) s[lo] = b, s[hi] = a;
      }
      __syncthreads();
    }
}

// Block sums of finite and minimum of bad, in thread 0.
template <int T>
__device__ void block_fold(int& finite, int& bad) {
  for (int o = kW / 2; o > 0; o >>= 1) {
    finite += ANVIL_SHFL_XOR(finite, o, kW);
    bad = min(bad, ANVIL_SHFL_XOR(bad, o, kW));
  }
  __shared__ int sf[T / kW], sb[T / kW];
  const int warp = int(threadIdx.x) / kW;
  if (int(threadIdx.x) % kW == 0) sf[warp] = finite, sb[warp] = bad;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < T / kW; w++) finite += sf[w], bad = min(bad, sb[w]);
}

__global__ void __launch_bounds__(kThreads) topk_span_kernel(const float* __restrict__ x, int V, int S, int K2,
                                                             uint64_t* __restrict__ part, int2* __restrict__ stat) {
  __shared__ uint64_t s[kSpan];
  const int r = int(blockIdx.y), sp = int(blockIdx.x);
  const float* row = x + int64_t(r) * V;
  const int c0 = sp * kSpan;
  int finite = 0, bad = INT_MAX;
  for (int i = int(threadIdx.x); i < kSpan; i += kThreads) {  // two columns a thread
    const int c = c0 + i;
    s[i] = c < V ? key_of(row[c], c, finite, bad) : 0;
  }
  __syncthreads();
  bitonic_desc(s, kSpan);
  for (int j = int(threadIdx.x); j < K2; j += kThreads) part[(int64_t(r) * S + sp) * K2 + j] = s[j];
  block_fold<kThreads>(finite, bad);
  if (threadIdx.x == 0) stat[int64_t(r) * S + sp] = make_int2(finite, bad);
}

__global__ void __launch_bounds__(kMergeThreads) topk_merge_kernel(const uint64_t* __restrict__ part,
                                                                   const int2* __restrict__ stat, int V, int S,
                                                                   int K2, int k, int32_t* __restrict__ ids,
                                                                   float* __restrict__ vals,
                                                                   int32_t* __restrict__ finite_out,
                                                                   int32_t* __restrict__ bad_out) {
  __shared__ uint64_t s[kMerge];
  __shared__ unsigned long long tau;
  __shared__ int cnt;
  const int r = int(blockIdx.x);
  const int64_t n = int64_t(S) * K2;
  const uint64_t* src = part + int64_t(r) * n;
  // Each span's list is sorted, and its k-th key is a lower bound of the row's k-th best: so is their maximum,
  // tau. A span holds at most k keys >= tau, and in practice the row holds ~k-2k of them: those alone are sorted
  // (40 at k = 40 instead of 4032 keys). If more than kMerge pass (k large, many spans), rounds over all keys.
  if (threadIdx.x == 0) tau = 0, cnt = 0;
  __syncthreads();
  for (int i = int(threadIdx.x); i < S; i += kMergeThreads) atomicMax(&tau, src[int64_t(i) * K2 + k - 1]);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += kMergeThreads) {
    const uint64_t key = src[i];
    if (key != 0 && key >= tau) {
      const int at = atomicAdd(&cnt, 1);
      if (at < kMerge) s[at] = key;
    }
  }
  __syncthreads();
  const int m = cnt;
  if (m <= kMerge) {
    int p2 = 1;
    while (p2 < m || p2 < k) p2 *= 2;
    for (int i = m + int(threadIdx.x); i < p2; i += kMergeThreads) s[i] = 0;
    __syncthreads();
    bitonic_desc(s, p2);
  }
  // Round 1 fills the whole buffer; later rounds keep the K2 best in front and refill behind them.
  int64_t next = 0;
  for (int round = 0; m > kMerge && (round == 0 || next < n); round++) {
    const int from = round == 0 ? 0 : K2;
    for (int i = from + int(threadIdx.x); i < kMerge; i += kMergeThreads) {
      const int64_t at = next + (i - from);
      s[i] = at < n ? src[at] : 0;
    }
    next += kMerge - from;
    __syncthreads();
    bitonic_desc(s, kMerge);
  }
  for (int j = int(threadIdx.x); j < k; j += kMergeThreads) {
    const uint64_t key = s[j];
    ids[int64_t(r) * k + j] = key ? int32_t(0xffffffffu - uint32_t(key)) : -1;
    vals[int64_t(r) * k + j] = key ? logit_of(key) : -INFINITY;
  }
  int finite = 0, bad = INT_MAX;
  for (int i = int(threadIdx.x); i < S; i += kMergeThreads) {
    const int2 st = stat[int64_t(r) * S + i];
    finite += st.x, bad = min(bad, st.y);
  }
  block_fold<kMergeThreads>(finite, bad);
  if (threadIdx.x == 0) {
    finite_out[r] = finite;
    bad_out[r] = bad != INT_MAX ? bad : (finite == 0 ? 2 * V : -1);
  }
}

}  // namespace

void topk_rows_gpu(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad) {
  const int R = int(logits.size(0)), V = int(logits.size(1));
  const int S = gpu::ceil_div(V, kSpan);
  int K2 = 1;
  while (K2 < k) K2 *= 2;
  static_assert(kMerge >= 2 * kTopKMax && kSpan >= kTopKMax, "a merge round keeps K2 and takes as many more");
  // Scratch through the caching allocator: no device allocation in a steady decode loop.
  Tensor part = Tensor::empty({int64_t(R) * S * K2}, DType::i64, logits.device());
  Tensor stat = Tensor::empty({int64_t(R) * S * 2}, DType::i32, logits.device());
  int2* st = static_cast<int2*>(stat.data_ptr());
  const dim3 grid{unsigned(S), unsigned(R)};
  topk_span_kernel<<<grid, kThreads, 0, gpu::stream()>>>(logits.data<float>(), V, S, K2,
                                                         static_cast<uint64_t*>(part.data_ptr()), st);
  ANVIL_LAUNCH_CHECK();
  topk_merge_kernel<<<unsigned(R), kMergeThreads, 0, gpu::stream()>>>(
      static_cast<const uint64_t*>(part.data_ptr()), st, V, S, K2, k, ids.data<int32_t>(), vals.data<float>(),
      finite.data<int32_t>(), bad.data<int32_t>());
  ANVIL_LAUNCH_CHECK();
}

}  // namespace anvil
