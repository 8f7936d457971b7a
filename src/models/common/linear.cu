// The linear layer's one kernel: the dynamic-FP8 epilogue y[n][o] = acc[n][o] * row_scale[n] (see linear.h).
// A grid-stride loop over the N*OC elements: memory-bound (4 bytes in, 2-4 out per element), and at prefill
// sizes (N=512, OC=14336: 29 MB) a few µs next to the ~1 ms GEMM before it.
#include <algorithm>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "models/common/linear.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads) scale_rows_kernel(const float* __restrict__ acc,
                                                              const float* __restrict__ s, T* __restrict__ y,
                                                              int64_t total, int64_t OC) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads)
    y[i] = from_f32<T>(acc[i] * s[i / OC]);
}

}  // namespace

void linear_scale_rows_gpu(const Tensor& acc, const Tensor& row_scale, Tensor& y) {
  const int64_t total = acc.numel(), OC = acc.size(1);
  if (total == 0) return;
  const int cu = gpu::device_info(gpu::current_device()).compute_units;
  const int blocks = int(std::min<int64_t>(gpu::ceil_div(total, kThreads), int64_t(cu) * 8));
  ANVIL_DISPATCH_FLOAT(y.dtype(), T, {
    scale_rows_kernel<T><<<blocks, kThreads, 0, gpu::stream()>>>(acc.data<float>(), row_scale.data<float>(),
                                                                  y.data<T>(), total, OC);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
