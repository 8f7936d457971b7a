// GPU attention decode (flash-decoding): one query per (b, head) against the first lens[b] rows of a KV cache.
// A single block per (b, head) would leave most of the GPU idle at small batch (B*NH = 32 blocks on 132 SMs),
// so the cache is split over `nsplit` blocks per (b, head):
//   attention_decode_split_kernel   each warp walks rows of its split with the online softmax (base 2), the
//                                   block merges its warps, and writes (m, l, acc[HD]) unnormalised;
//   attention_decode_combine_kernel out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s,  M = max_s m_s.
// lens live on the device and are not read by the host (a copy would stall decoding and break graph
// capture): the kernels clamp them to [0, Tmax], and an empty row gives zeros.
#include <algorithm>

#include "kernels/attention/attention_gpu.cuh"  // first: it brings the vendor runtime that core/ headers need
#include "core/dispatch.h"
#include "kernels/attention/attention.h"

namespace anvil {
namespace {

using namespace attn;

constexpr int kThreads = 128;              // 4 warps of 32 or 2 wavefronts of 64
constexpr int kWarps = kThreads / gpu::kWarpSize;
constexpr int kMinRowsPerSplit = 64;       // fewer rows per block would be all launch and merge overhead

template <class T, int HD>
__global__ void __launch_bounds__(kThreads) attention_decode_split_kernel(const T* __restrict__ q, const T* __restrict__ kc,
                                                                          const T* __restrict__ vc,
                                                                          const int32_t* __restrict__ lens,
                                                                          float* __restrict__ part, int NH, int NKV,
                                                                          int Tmax, int rows_per_split, float scale) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  constexpr int W = gpu::kWarpSize, E = (HD + W - 1) / W;  // elements of a row per lane
  __shared__ float sm[kWarps], sl[kWarps], sacc[kWarps][HD];
  const int split = blockIdx.x, nsplit = gridDim.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int kvh = h / (NH / NKV), lane = threadIdx.x % W, warp = threadIdx.x / W;
  const int len = min(max(lens[b], 0), Tmax);
  const int start = split * rows_per_split, end = min(start + rows_per_split, len);

  float qr[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; e++) {
    const int d = lane + W * e;
    qr[e] = d < HD ? to_f32(q[int64_t(bh) * HD + d]) * scale * kLog2e : 0.f;
    acc[e] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int j = start + warp; j < end; j += kWarps) {
    const int64_t row = ((int64_t(b) * Tmax + j) * NKV + kvh) * HD;
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < E; e++) {
      const int d = lane + W * e;
      if (d < HD) s = fmaf(qr[e], to_f32(kc[row + d]), s);
    }
    s = gpu::warp_sum(s);  // every lane has the score: the branch below is warp-uniform
    if (s > m) {
      const float alpha = exp2f(m - s);
      l *= alpha;
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] *= alpha;
      m = s;
    }
    const float pj = exp2f(s - m);
    l += pj;
#pragma unroll
    for (int e = 0; e < E; e++) {
      const int d = lane + W * e;
      if (d < HD) acc[e] = fmaf(pj, to_f32(vc[row + d]), acc[e]);
    }
  }
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; e++) {
    const int d = lane + W * e;
    if (d < HD) sacc[warp][d] = acc[e];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; w++) M = fmaxf(M, sm[w]);
  float* out = part + (int64_t(bh) * nsplit + split) * (HD + 2);
  for (int d = threadIdx.x; d < HD + 1; d += kThreads) {
    float v = 0.f;  // d < HD: acc[d]; d == HD: l
    for (int w = 0; w < kWarps; w++) {
      const float f = sm[w] == -INFINITY ? 0.f : exp2f(sm[w] - M);  // a warp without rows adds nothing
      v += f * (d < HD ? sacc[w][d] : sl[w]);
    }
    out[d < HD ? 2 + d : 1] = v;
  }
  if (threadIdx.x == 0) out[0] = M;
}

template <class T, int HD>
__global__ void __launch_bounds__(kThreads) attention_decode_combine_kernel(const float* __restrict__ part,
                                                                            T* __restrict__ out, int nsplit) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  const int bh = blockIdx.x;
  const float* pp = part + int64_t(bh) * nsplit * (HD + 2);
  float M = -INFINITY;
  for (int s = 0; s < nsplit; s++) M = fmaxf(M, pp[s * (HD + 2)]);
  for (int d = threadIdx.x; d < HD; d += kThreads) {
    float num = 0.f, den = 0.f;
    for (int s = 0; s < nsplit; s++) {
      const float ms = pp[s * (HD + 2)];
      if (ms == -INFINITY) continue;  // an empty split
      const float f = exp2f(ms - M);
      num += f * pp[s * (HD + 2) + 2 + d];
      den += f * pp[s * (HD + 2) + 1];
    }
    out[int64_t(bh) * HD + d] = from_f32<T>(den > 0.f ? num / den : 0.f);
  }
}

template <class T, int HD>
void launch(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& lens, float scale, Tensor& out) {
  const int B = int(q.size(0)), NH = int(q.size(1)), Tmax = int(kc.size(1)), NKV = int(kc.size(2));
  // Enough blocks for two per compute unit, but no split shorter than kMinRowsPerSplit rows of Tmax.
  const int cus = gpu::device_info(gpu::current_device()).compute_units;
  const int want = std::max(1, gpu::ceil_div(2 * cus, int64_t(B) * NH));
  const int nsplit = std::clamp(std::min(want, gpu::ceil_div(Tmax, kMinRowsPerSplit)), 1, 65535);
  const int rows_per_split = gpu::ceil_div(Tmax, nsplit);
  Tensor part = Tensor::empty({int64_t(B) * NH, nsplit, HD + 2}, DType::f32, q.device());
  attention_decode_split_kernel<T, HD><<<dim3(unsigned(nsplit), unsigned(B * NH)), kThreads, 0, gpu::stream()>>>(
      q.data<T>(), kc.data<T>(), vc.data<T>(), lens.data<int32_t>(), part.data<float>(), NH, NKV, Tmax,
      rows_per_split, scale);
  ANVIL_LAUNCH_CHECK();
  attention_decode_combine_kernel<T, HD><<<unsigned(B * NH), kThreads, 0, gpu::stream()>>>(part.data<float>(),
                                                                                          out.data<T>(), nsplit);
  ANVIL_LAUNCH_CHECK();
}

}  // namespace

void attention_decode_gpu(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                          float scale, Tensor& out) {
  const int64_t B = q.size(0), NH = q.size(1), HD = q.size(2);
  ANVIL_CHECK(B * NH <= 65535, "attention_decode", "B*NH <= 65535 (grid y)", q.describe());
  ANVIL_DISPATCH_FLOAT(q.dtype(), T_, {
    switch (HD) {
      case 16: launch<T_, 16>(q, k_cache, v_cache, lens, scale, out); break;  // small models (tests, tiny parity runs)
      case 32: launch<T_, 32>(q, k_cache, v_cache, lens, scale, out); break;
      case 64: launch<T_, 64>(q, k_cache, v_cache, lens, scale, out); break;
      case 80: launch<T_, 80>(q, k_cache, v_cache, lens, scale, out); break;
      case 96: launch<T_, 96>(q, k_cache, v_cache, lens, scale, out); break;
      case 128: launch<T_, 128>(q, k_cache, v_cache, lens, scale, out); break;
      default: ANVIL_THROW("attention_decode", "HD in {16, 32, 64, 80, 96, 128}", HD);
    }
  });
}

}  // namespace anvil
