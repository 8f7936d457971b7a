// GPU swiglu, forward and backward: a memory-bound map over (row, column) with 16-byte loads of gate and
// up. grid.x covers a row's H columns (P per thread), grid.y strides over rows, so no thread divides an
// index by H. Bytes per element (bf16): forward 4 read + 2 written (1 for FP8 out); backward 6 read + 4.
#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/elementwise/fp8_io.h"
#include "kernels/swiglu/swiglu.h"
#include "kernels/swiglu/swiglu_gpu.cuh"

namespace anvil {
namespace {

constexpr int kThreads = 256;

// VEC: P = 16 bytes of T per access (H % P == 0, pointers aligned); otherwise one element per thread.
template <class T, class TO, bool VEC>
__global__ void __launch_bounds__(kThreads) swiglu_fwd_kernel(const T* __restrict__ gu, TO* __restrict__ out,
                                                                const float* __restrict__ out_scale, int64_t N,
                                                                int H) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int j = (blockIdx.x * kThreads + threadIdx.x) * P;
  if (j >= H) return;
  const float inv_scale = out_scale ? 1.f / out_scale[0] : 1.f;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const T* row = gu + n * 2 * H;
    const auto g = load_vec<T, P>(row + j), u = load_vec<T, P>(row + H + j);
    Vec<TO, P> o;
#pragma unroll
    for (int k = 0; k < P; k++) {
      const float gv = to_f32(g.v[k]);
      o.v[k] = from_f32<TO>(swiglu_f32<T>(gv, to_f32(u.v[k])) * inv_scale);
    }
    store_vec(out + n * H + j, o);
  }
}

// gu and dgu may be the same buffer: each thread reads its (gate, up) elements before writing them.
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) swiglu_bwd_kernel(const T* __restrict__ dout, const T* gu, T* dgu,
                                                                int64_t N, int H) {
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int j = (blockIdx.x * kThreads + threadIdx.x) * P;
  if (j >= H) return;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const auto g = load_vec<T, P>(gu + n * 2 * H + j), u = load_vec<T, P>(gu + n * 2 * H + H + j);
    const auto d = load_vec<T, P>(dout + n * H + j);
    Vec<T, P> dg, du;
#pragma unroll
    for (int k = 0; k < P; k++) {
      const float gv = to_f32(g.v[k]), uv = to_f32(u.v[k]), dv = to_f32(d.v[k]), s = swiglu_sigmoid<T>(gv);
      dg.v[k] = from_f32<T>(dv * uv * s * (1.f + gv * (1.f - s)));
      du.v[k] = from_f32<T>(dv * gv * s);
    }
    store_vec(dgu + n * 2 * H + j, dg);
    store_vec(dgu + n * 2 * H + H + j, du);
  }
}

// 65535: the grid.y limit of both vendors; more rows loop.
dim3 grid_for(int64_t N, int H, int P) {
  return dim3(gpu::ceil_div(gpu::ceil_div(H, P), kThreads), unsigned(std::min<int64_t>(N, 65535)));
}

}  // namespace

void swiglu_fwd_gpu(const Tensor& gu, Tensor& out, const Tensor& out_scale) {
  const int H = int(out.size(-1));
  const int64_t N = out.numel() / H;
  const float* scale = out_scale.defined() ? out_scale.data<float>() : nullptr;
  ANVIL_DISPATCH_FLOAT(gu.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = H % P == 0 && gpu::aligned16(gu.data_ptr()) && gpu::aligned16(out.data_ptr());
    ANVIL_DISPATCH_OUT(out.dtype(), T, TO, {
      auto kernel = vec ? swiglu_fwd_kernel<T, TO, true> : swiglu_fwd_kernel<T, TO, false>;
      kernel<<<grid_for(N, H, vec ? P : 1), kThreads, 0, gpu::stream()>>>(gu.data<T>(), out.data<TO>(), scale, N, H);
      ANVIL_LAUNCH_CHECK();
    });
  });
}

void swiglu_bwd_gpu(const Tensor& dout, const Tensor& gu, Tensor& dgu) {
  const int H = int(dout.size(-1));
  const int64_t N = dout.numel() / H;
  ANVIL_DISPATCH_FLOAT(gu.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = H % P == 0 && gpu::aligned16(gu.data_ptr()) && gpu::aligned16(dout.data_ptr()) &&
                     gpu::aligned16(dgu.data_ptr());
    auto kernel = vec ? swiglu_bwd_kernel<T, true> : swiglu_bwd_kernel<T, false>;
    kernel<<<grid_for(N, H, vec ? P : 1), kThreads, 0, gpu::stream()>>>(dout.data<T>(), gu.data<T>(), dgu.data<T>(),
                                                                       N, H);
    ANVIL_LAUNCH_CHECK();
  });
}

}  // namespace anvil
