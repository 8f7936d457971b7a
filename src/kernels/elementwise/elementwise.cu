// GPU elementwise ops. One grid-stride map kernel moves P elements per access (16 bytes of the widest
// operand) when every pointer is 16-byte aligned, with a scalar loop for the N % P tail; the reductions run
// in two fixed-shape passes (per-block partials, then one block in order), so a sum is the same on every run.
#include "backends/gpu/common.cuh"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/fp8_io.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 1024;  // partials of the first pass: 4 KB, summed by one block

// Elements per vector access: 16 bytes of the wider of the two element types.
template <class A, class B>
constexpr int pack_of() { return 16 / (sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B)); }

// The ops. vec<P>(i) handles elements [i, i + P), one(i) element i. Pointers may alias (out = a, acc += x).
template <class T>
struct AddOp {
  const T* a;
  const T* b;
  T* out;
  template <int P> __device__ void vec(int64_t i) const {
    const auto x = load_vec<T, P>(a + i), y = load_vec<T, P>(b + i);
    Vec<T, P> o;
#pragma unroll
    for (int k = 0; k < P; k++) o.v[k] = from_f32<T>(to_f32(x.v[k]) + to_f32(y.v[k]));
    store_vec(out + i, o);
  }
  __device__ void one(int64_t i) const { out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i])); }
};
template <class TA, class TX>
struct AddInplaceOp {
  TA* acc;
  const TX* x;
  float alpha;
  template <int P> __device__ void vec(int64_t i) const {
    auto s = load_vec<TA, P>(acc + i);
    const auto y = load_vec<TX, P>(x + i);
#pragma unroll
    for (int k = 0; k < P; k++) s.v[k] = from_f32<TA>(to_f32(s.v[k]) + alpha * to_f32(y.v[k]));
    store_vec(acc + i, s);
  }
  __device__ void one(int64_t i) const { acc[i] = from_f32<TA>(to_f32(acc[i]) + alpha * to_f32(x[i])); }
};
template <class T>
struct ScaleOp {
  T* x;
  float s;
  template <int P> __device__ void vec(int64_t i) const {
    auto v = load_vec<T, P>(x + i);
#pragma unroll
    for (int k = 0; k < P; k++) v.v[k] = from_f32<T>(to_f32(v.v[k]) * s);
    store_vec(x + i, v);
  }
  __device__ void one(int64_t i) const { x[i] = from_f32<T>(to_f32(x[i]) * s); }
};
struct NegExpOp {
  const float* x;
  float* out;
  template <int P> __device__ void vec(int64_t i) const {
    auto v = load_vec<float, P>(x + i);
#pragma unroll
    for (int k = 0; k < P; k++) v.v[k] = -expf(v.v[k]);
    store_vec(out + i, v);
  }
  __device__ void one(int64_t i) const { out[i] = -expf(x[i]); }
};
// anvil_mul_rn rounds each product on its own: a plain `acc + alpha * a * b` would be contracted into an FMA,
// which rounds once and so can differ from the CPU in the last bit.
struct AddcmulInplaceOp {
  float* acc;
  const float* a;
  const float* b;
  float alpha;
  __device__ float term(float x, float y) const { return anvil_mul_rn(anvil_mul_rn(alpha, x), y); }
  template <int P> __device__ void vec(int64_t i) const {
    auto s = load_vec<float, P>(acc + i);
    const auto x = load_vec<float, P>(a + i), y = load_vec<float, P>(b + i);
#pragma unroll
    for (int k = 0; k < P; k++) s.v[k] += term(x.v[k], y.v[k]);
    store_vec(acc + i, s);
  }
  __device__ void one(int64_t i) const { acc[i] += term(a[i], b[i]); }
};
template <class TS, class TD>
struct CastOp {
  const TS* src;
  TD* dst;
  float factor;
  template <int P> __device__ void vec(int64_t i) const {
    const auto v = load_vec<TS, P>(src + i);
    Vec<TD, P> o;
#pragma unroll
    for (int k = 0; k < P; k++) o.v[k] = from_f32<TD>(to_f32(v.v[k]) * factor);
    store_vec(dst + i, o);
  }
  __device__ void one(int64_t i) const { dst[i] = from_f32<TD>(to_f32(src[i]) * factor); }
};

template <int P, bool VEC, class Op>
__global__ void __launch_bounds__(kThreads) map_kernel(Op op, int64_t N) {
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x, stride = int64_t(gridDim.x) * kThreads;
  int64_t done = 0;
  if constexpr (VEC) {
    const int64_t packs = N / P;
    for (int64_t p = t; p < packs; p += stride) op.template vec<P>(p * P);
    done = packs * P;
  }
  for (int64_t i = done + t; i < N; i += stride) op.one(i);
}

// Enough blocks to fill every SM at full occupancy (2048 threads), no more: the loop covers the rest.
int map_blocks(int64_t work) {
  const int64_t fill = int64_t(gpu::device_info(gpu::current_device()).compute_units) * (2048 / kThreads);
  return int(std::max<int64_t>(1, std::min<int64_t>(gpu::ceil_div(work, kThreads), fill)));
}

template <int P, class Op>
void launch_map(const Op& op, int64_t N, bool aligned) {
  const bool vec = aligned && N >= P;
  const int blocks = map_blocks(vec ? N / P : N);
  if (vec) map_kernel<P, true, Op><<<blocks, kThreads, 0, gpu::stream()>>>(op, N);
  else map_kernel<P, false, Op><<<blocks, kThreads, 0, gpu::stream()>>>(op, N);
  ANVIL_LAUNCH_CHECK();
}

// ---- reductions: f(x) summed (SumSq) or max-ed (AbsMax, NaN-propagating) -------------------------------
struct SumSq {
  static __device__ float init() { return 0.f; }
  static __device__ float map(float v) { return v * v; }
  static __device__ float join(float a, float b) { return a + b; }
};
struct AbsMax {
  static __device__ float init() { return 0.f; }
  static __device__ float map(float v) { return fabsf(v); }
  static __device__ float join(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
};

template <class R>
__device__ float block_reduce(float v, float* scratch) {
  constexpr int W = gpu::kWarpSize;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = R::join(v, ANVIL_SHFL_XOR(v, o, W));
  const int lane = threadIdx.x % W, warp = threadIdx.x / W;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / W ? scratch[lane] : R::init();
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) v = R::join(v, ANVIL_SHFL_XOR(v, o, W));
  }
  return v;  // valid in thread 0
}

template <class T, class R, bool VEC>
__global__ void __launch_bounds__(kThreads) reduce_partial_kernel(const T* __restrict__ x, int64_t N,
                                                                    float* __restrict__ partial) {
  __shared__ float scratch[kThreads / gpu::kWarpSize];
  constexpr int P = gpu::Pack<T>::N;
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x, stride = int64_t(gridDim.x) * kThreads;
  float acc = R::init();
  int64_t done = 0;
  if constexpr (VEC) {
    for (int64_t p = t; p < N / P; p += stride) {
      const auto v = gpu::load_pack(x + p * P);
#pragma unroll
      for (int k = 0; k < P; k++) acc = R::join(acc, R::map(to_f32(v.v[k])));
    }
    done = N / P * P;
  }
  for (int64_t i = done + t; i < N; i += stride) acc = R::join(acc, R::map(to_f32(x[i])));
  acc = block_reduce<R>(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block folds the G partials in a fixed order; SumSq adds into out, AbsMax overwrites it.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_final_kernel(const float* __restrict__ partial, int G,
                                                                  float* __restrict__ out, bool accumulate) {
  __shared__ float scratch[kThreads / gpu::kWarpSize];
  float acc = R::init();
  for (int g = threadIdx.x; g < G; g += kThreads) acc = R::join(acc, partial[g]);
  acc = block_reduce<R>(acc, scratch);
  if (threadIdx.x == 0) out[0] = accumulate ? out[0] + acc : acc;
}

template <class R>
void reduce(const Tensor& x, Tensor& out, bool accumulate) {
  const int64_t N = x.numel();
  Tensor partial = Tensor::empty({kReduceBlocks}, DType::f32, x.device());
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = gpu::aligned16(x.data_ptr());
    const int G = int(std::min<int64_t>(kReduceBlocks, gpu::ceil_div(vec ? N / P + 1 : N, kThreads)));
    auto kernel = vec ? reduce_partial_kernel<T, R, true> : reduce_partial_kernel<T, R, false>;
    kernel<<<G, kThreads, 0, gpu::stream()>>>(x.data<T>(), N, partial.data<float>());
    ANVIL_LAUNCH_CHECK();
    reduce_final_kernel<R><<<1, kThreads, 0, gpu::stream()>>>(partial.data<float>(), G, out.data<float>(),
                                                              accumulate);
    ANVIL_LAUNCH_CHECK();
  });
}

// A handful of i32 (decode positions): one thread each, a grid-stride loop for anything larger.
__global__ void add_int_kernel(int32_t* x, int32_t v, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = int32_t(uint32_t(x[i]) + uint32_t(v));
}

}  // namespace

void elementwise_add_gpu(const Tensor& a, const Tensor& b, Tensor& out) {
  ANVIL_DISPATCH_FLOAT(a.dtype(), T, {
    const bool aligned = gpu::aligned16(a.data_ptr()) && gpu::aligned16(b.data_ptr()) && gpu::aligned16(out.data_ptr());
    launch_map<pack_of<T, T>()>(AddOp<T>{a.data<T>(), b.data<T>(), out.data<T>()}, a.numel(), aligned);
  });
}

void elementwise_add_inplace_gpu(Tensor& acc, const Tensor& x, float alpha) {
  const bool aligned = gpu::aligned16(acc.data_ptr()) && gpu::aligned16(x.data_ptr());
  ANVIL_DISPATCH_FLOAT(x.dtype(), TX, {
    if (acc.dtype() == DType::f32)
      launch_map<pack_of<float, TX>()>(AddInplaceOp<float, TX>{acc.data<float>(), x.data<TX>(), alpha}, x.numel(),
                                       aligned);
    else
      launch_map<pack_of<TX, TX>()>(AddInplaceOp<TX, TX>{acc.data<TX>(), x.data<TX>(), alpha}, x.numel(), aligned);
  });
}

void elementwise_add_int_gpu(Tensor& x, int32_t v) {
  add_int_kernel<<<map_blocks(x.numel()), kThreads, 0, gpu::stream()>>>(x.data<int32_t>(), v, x.numel());
  ANVIL_LAUNCH_CHECK();
}

void elementwise_scale_gpu(Tensor& x, float s) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    launch_map<pack_of<T, T>()>(ScaleOp<T>{x.data<T>(), s}, x.numel(), gpu::aligned16(x.data_ptr()));
  });
}

void elementwise_neg_exp_gpu(const Tensor& x, Tensor& out) {
  const bool aligned = gpu::aligned16(x.data_ptr()) && gpu::aligned16(out.data_ptr());
  launch_map<pack_of<float, float>()>(NegExpOp{x.data<float>(), out.data<float>()}, x.numel(), aligned);
}

void elementwise_addcmul_inplace_gpu(Tensor& acc, const Tensor& a, const Tensor& b, float alpha) {
  const bool aligned = gpu::aligned16(acc.data_ptr()) && gpu::aligned16(a.data_ptr()) && gpu::aligned16(b.data_ptr());
  launch_map<pack_of<float, float>()>(AddcmulInplaceOp{acc.data<float>(), a.data<float>(), b.data<float>(), alpha},
                                      acc.numel(), aligned);
}

void elementwise_cast_gpu(const Tensor& src, Tensor& dst, float scale) {
  if (src.dtype() == dst.dtype() && scale == 1.f) return gpu::copy_d2d(dst.data_ptr(), src.data_ptr(), src.nbytes());
  const float factor = dtype_is_fp8(src.dtype()) ? scale : 1.f / scale;
  const bool aligned = gpu::aligned16(src.data_ptr()) && gpu::aligned16(dst.data_ptr());
  ANVIL_DISPATCH_FLOAT_FP8(src.dtype(), TS, {
    ANVIL_DISPATCH_FLOAT_FP8(dst.dtype(), TD, {
      launch_map<pack_of<TS, TD>()>(CastOp<TS, TD>{src.data<TS>(), dst.data<TD>(), factor}, src.numel(), aligned);
    });
  });
}

void elementwise_sum_squares_gpu(const Tensor& x, Tensor& out) { reduce<SumSq>(x, out, true); }
void elementwise_amax_gpu(const Tensor& x, Tensor& out) { reduce<AbsMax>(x, out, false); }

}  // namespace anvil
