// GPU rope_append. Blocks (token, chunk of kThreads items), grid-stride over the B*T tokens: each block puts the
// token's HD/2 cos/sin pairs in shared memory, then its threads take one item each of three ranges with 16-byte
// packs — q pairs (rotated into q), k pairs (rotated into the cache row), v packs (copied into the cache row).
// A decode token of the 8B shape is 256 + 64 + 128 items: 4 blocks of 128 threads, one item per thread. (One
// block walking all items took 6.0 us per token on the H200: four dependent load round trips per thread, in a
// step where it runs 32 times.)
#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/elementwise/fp8_io.h"
#include "kernels/rope/rope_rotate.cuh"
#include "kernels/rope_append/rope_append.h"

namespace anvil {
namespace {

constexpr int kThreads = 128;

struct Dims {
  int64_t N;    // B*T tokens
  int T, NH, NKV, HD, Tmax;
};

template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) rope_append_kernel(const T* __restrict__ qkv,
                                                                 const int32_t* __restrict__ start,
                                                                 const float* __restrict__ inv_freq, T* __restrict__ q,
                                                                 T* __restrict__ kc, T* __restrict__ vc, Dims d) {
  extern __shared__ float cs[];  // cos in [0, half), sin in [half, HD)
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int HD = d.HD, half = HD / 2, per_head = half / P;
  const int q_items = d.NH * per_head, k_items = d.NKV * per_head, v_items = d.NKV * HD / P;
  const int64_t QD = int64_t(d.NH) * HD, KVD = int64_t(d.NKV) * HD;
  for (int64_t n = blockIdx.x; n < d.N; n += gridDim.x) {
    const int64_t b = n / d.T;
    const int pos = start[b] + int(n - b * d.T);
    __syncthreads();  // the previous token's table is no longer read
    rope_gpu::fill_table(cs, float(pos), inv_freq, half, 1.f, kThreads);
    __syncthreads();
    const T* x = qkv + n * (QD + 2 * KVD);
    const bool in_cache = pos >= 0 && pos < d.Tmax;
    const int64_t row = (b * d.Tmax + pos) * KVD;
    for (int k = blockIdx.y * kThreads + threadIdx.x; k < q_items + k_items + v_items; k += gridDim.y * kThreads) {
      if (k < q_items) {
        const int h = k / per_head, i = (k - h * per_head) * P;
        rope_gpu::rotate<T, P>(x + int64_t(h) * HD, q + n * QD + int64_t(h) * HD, cs, i, half);
      } else if (!in_cache) {
        break;
      } else if (k < q_items + k_items) {
        const int kk = k - q_items, h = kk / per_head, i = (kk - h * per_head) * P;
        rope_gpu::rotate<T, P>(x + QD + int64_t(h) * HD, kc + row + int64_t(h) * HD, cs, i, half);
      } else {
        const int64_t o = int64_t(k - q_items - k_items) * P;
        store_vec(vc + row + o, load_vec<T, P>(x + QD + KVD + o));
      }
    }
  }
}

}  // namespace

void rope_append_gpu(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                     Tensor& v_cache) {
  Dims d;
  d.N = q.size(0) * q.size(1);
  d.T = int(q.size(1));
  d.NH = int(q.size(2));
  d.HD = int(q.size(3));
  d.Tmax = int(k_cache.size(1));
  d.NKV = int(k_cache.size(2));
  const size_t smem = size_t(d.HD) * sizeof(float);
  ANVIL_DISPATCH_FLOAT(qkv.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = (d.HD / 2) % P == 0 && gpu::aligned16(qkv.data_ptr()) && gpu::aligned16(q.data_ptr()) &&
                     gpu::aligned16(k_cache.data_ptr()) && gpu::aligned16(v_cache.data_ptr());
    const int p = vec ? P : 1;
    const int items = (d.NH + d.NKV) * (d.HD / 2 / p) + d.NKV * d.HD / p;
    // Chunks per token: one item per thread while the grid stays within 4 blocks per SM (prefill batches have
    // enough tokens to fill the GPU with one chunk each).
    const int64_t cus = gpu::device_info(gpu::current_device()).compute_units;
    const int64_t chunks =
        std::max<int64_t>(1, std::min<int64_t>(gpu::ceil_div(items, kThreads), gpu::ceil_div(4 * cus, d.N)));
    const dim3 blocks(unsigned(std::min<int64_t>(d.N, 65535)), unsigned(chunks));
    auto kernel = vec ? rope_append_kernel<T, true> : rope_append_kernel<T, false>;
    kernel<<<blocks, kThreads, smem, gpu::stream()>>>(qkv.data<T>(), start.data<int32_t>(), inv_freq.data<float>(),
                                                      q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), d);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
