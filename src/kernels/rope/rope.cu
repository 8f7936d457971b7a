// GPU rope, both directions. One block per token (grid-stride): the token's HD/2 cos/sin pairs are computed
// once into shared memory and shared by its NH heads (32 heads: 32x fewer sincosf, whose slow path for
// |angle| > ~1e5 rad costs hundreds of instructions); then each thread rotates P pairs with 16-byte loads.
#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/elementwise/fp8_io.h"
#include "kernels/rope/rope.h"
#include "kernels/rope/rope_rotate.cuh"

namespace anvil {
namespace {

constexpr int kThreads = 256;

// x and y may be the same buffer: each thread reads both halves of its pairs before writing them.
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) rope_kernel(const T* x, const int32_t* __restrict__ pos,
                                                          const float* __restrict__ inv_freq, T* y, int64_t N,
                                                          int NH, int HD, float sign) {
  extern __shared__ float cs[];  // cos in [0, half), sign * sin in [half, HD)
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int half = HD / 2, per_head = half / P, items = NH * per_head;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float p = float(pos[n]);
    __syncthreads();  // the previous token's table is no longer read
    rope_gpu::fill_table(cs, p, inv_freq, half, sign, kThreads);
    __syncthreads();
    const int64_t base = n * NH * HD;
    for (int k = threadIdx.x; k < items; k += kThreads) {
      const int h = k / per_head, i = (k - h * per_head) * P;
      rope_gpu::rotate<T, P>(x + base + int64_t(h) * HD, y + base + int64_t(h) * HD, cs, i, half);
    }
  }
}

}  // namespace

void rope_fwd_gpu(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y, bool inverse) {
  const int64_t N = x.size(0);
  const int NH = int(x.size(1)), HD = int(x.size(2));
  const unsigned blocks = unsigned(std::min<int64_t>(N, 65535));
  const size_t smem = size_t(HD) * sizeof(float);
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = (HD / 2) % P == 0 && gpu::aligned16(x.data_ptr()) && gpu::aligned16(y.data_ptr());
    auto kernel = vec ? rope_kernel<T, true> : rope_kernel<T, false>;
    kernel<<<blocks, kThreads, smem, gpu::stream()>>>(x.data<T>(), pos.data<int32_t>(), inv_freq.data<float>(),
                                                      y.data<T>(), N, NH, HD, inverse ? -1.f : 1.f);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
