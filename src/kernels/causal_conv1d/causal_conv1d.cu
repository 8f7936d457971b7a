// GPU causal_conv1d, forward, backward and decode step.
// Grid: blockIdx.x = row (b*D + d, up to 2^31), blockIdx.y = segment of kThreads*P timesteps (backward: times
// the reps, below). Each thread owns
// P = 16/sizeof(T) consecutive timesteps (one 16-byte pack: 8 bf16) and reads the W-1 inputs before them with
// scalar loads; those sit in the neighbouring thread's pack, so they hit L1 and HBM sees each byte once:
// forward 2 bytes/element moved per dtype byte (x in, out out), backward 3 (x, dout in, dx out).
#include <cstdlib>

#include "backends/gpu/common.cuh"
#include "backends/gpu/fast_math.cuh"
#include "core/dispatch.h"
#include "kernels/causal_conv1d/causal_conv1d.h"

namespace anvil {
namespace {

constexpr int kThreads = 128;  // 4 warps of 32 or 2 wavefronts of 64; a 2048-step bf16 row is 2 blocks

__device__ __forceinline__ float sigmoid_f(float v) { return 1.f / (1.f + expf(-v)); }
// With 16-bit outputs the MUFU exponential and reciprocal (2 ulp) are exact enough and cost 4 instructions
// instead of ~20 (expf + IEEE division): the forward was SM-bound at 85% compute throughput with the exact pair.
using gpu::sigmoid_t;  // fast_math.cuh

// Loads P consecutive elements at t0 (16-byte pack when VEC), zero past L. Time is 32-bit (rows are at most
// kMaxPackL steps): 64-bit compares were pairs of ISETP.
template <class T, bool VEC, int P>
__device__ __forceinline__ void load_run(const T* __restrict__ r, int t0, int L, float* dst) {
  if constexpr (VEC) {
    if (t0 + P <= L) {
      auto p = gpu::load_pack(r + t0);
#pragma unroll
      for (int i = 0; i < P; i++) dst[i] = to_f32(p.v[i]);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < P; i++) dst[i] = t0 + i < L ? to_f32(r[t0 + i]) : 0.f;
}

template <class T, bool VEC, int P>
__device__ __forceinline__ void store_run(T* __restrict__ r, int t0, int L, const float* src) {
  if constexpr (VEC) {
    if (t0 + P <= L) {
      gpu::Pack<T> p;
#pragma unroll
      for (int i = 0; i < P; i++) p.v[i] = from_f32<T>(src[i]);
      gpu::store_pack(r + t0, p);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < P; i++)
    if (t0 + i < L) r[t0 + i] = from_f32<T>(src[i]);
}

// x, out: (B, D, L);  w: (D, W) f32;  bias: (D) f32 or null. One pack per thread: two packs per thread, loaded
// before either is computed, measured slower on the H200 (66% of copy against 73%).
template <class T, int W, bool VEC>
__global__ void __launch_bounds__(kThreads) conv_fwd_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                                            const float* __restrict__ bias, bool silu,
                                                            T* __restrict__ out, int D, int L) {
  constexpr int P = gpu::Pack<T>::N;
  const int64_t row = blockIdx.x;
  const int d = int(blockIdx.x % unsigned(D));
  const int t0 = (int(blockIdx.y) * kThreads + int(threadIdx.x)) * P;
  if (t0 >= L) return;
  const T* xr = x + row * L;
  float win[P + W - 1];  // x[t0-(W-1) .. t0+P-1]
#pragma unroll
  for (int j = 0; j < W - 1; j++) {
    const int t = t0 - (W - 1) + j;
    win[j] = t >= 0 ? to_f32(xr[t]) : 0.f;
  }
  load_run<T, VEC, P>(xr, t0, L, win + W - 1);
  float wk[W];
#pragma unroll
  for (int k = 0; k < W; k++) wk[k] = w[d * W + k];
  const float b0 = bias ? bias[d] : 0.f;
  float o[P];
#pragma unroll
  for (int i = 0; i < P; i++) {
    float s = b0;
#pragma unroll
    for (int k = 0; k < W; k++) s = fmaf(wk[k], win[i + k], s);
    o[i] = silu ? s * sigmoid_t<T>(s) : s;
  }
  store_run<T, VEC, P>(out + row * L, t0, L, o);
}

// The backward's block covers `reps` * kThreads packs of a row, one at a time per thread: its W + 1 block
// reduction (one pass, 2 barriers) and atomics are paid once per reps * 1024 bf16 steps. H200, issue shape
// (L = 2048): 1 rep 59% of copy, 2 or 4 reps (the whole row in one block) 65-66%; with W+1 separate block sums
// it had been 46-50% and 58%. ANVIL_CONV_BWD_REPS overrides the default (read once).
int conv_bwd_reps() {
  static const int r = [] {
    const char* e = std::getenv("ANVIL_CONV_BWD_REPS");
    const int v = e && *e ? std::atoi(e) : 4;
    return v >= 1 && v <= 64 ? v : 4;
  }();
  return r;
}
// Backward of one thread's P outputs: needs dpre at t0 .. t0+P+W-2, hence x at t0-(W-1) .. t0+P+W-2 (to recompute
// the pre-activation under SiLU) and dout at t0 .. t0+P+W-2. dw/dbias: block sums, one atomic per block and tap.
template <class T, int W, bool VEC>
__global__ void __launch_bounds__(kThreads) conv_bwd_kernel(const T* __restrict__ dout, const T* __restrict__ x,
                                                            const float* __restrict__ w,
                                                            const float* __restrict__ bias, bool silu,
                                                            T* __restrict__ dx, float* __restrict__ dw,
                                                            float* __restrict__ dbias, int D, int L, int reps) {
  constexpr int P = gpu::Pack<T>::N;
  __shared__ float red[kThreads / gpu::kWarpSize][W + 1];
  const int64_t row = blockIdx.x;
  const int d = int(blockIdx.x % unsigned(D));
  const T* xr = x + row * L;
  const T* gr = dout + row * L;
  float wk[W];
#pragma unroll
  for (int k = 0; k < W; k++) wk[k] = w[d * W + k];
  const float b0 = bias ? bias[d] : 0.f;

  float part[W + 1];  // dw taps, then dbias: summed over the thread's reps, then once over the block
#pragma unroll
  for (int k = 0; k <= W; k++) part[k] = 0.f;
  for (int r = 0; r < reps; r++) {
    const int t0 = ((int(blockIdx.y) * reps + r) * kThreads + int(threadIdx.x)) * P;
    if (t0 >= L) break;
    float xw[P + 2 * (W - 1)];  // x[t0-(W-1) .. t0+P+W-2], zero outside [0, L)
    float dp[P + W - 1];        // dpre[t0 .. t0+P+W-2], zero past L
#pragma unroll
    for (int j = 0; j < W - 1; j++) {
      const int tb = t0 - (W - 1) + j, ta = t0 + P + j;
      xw[j] = tb >= 0 ? to_f32(xr[tb]) : 0.f;
      xw[W - 1 + P + j] = ta < L ? to_f32(xr[ta]) : 0.f;
      dp[P + j] = ta < L ? to_f32(gr[ta]) : 0.f;
    }
    load_run<T, VEC, P>(xr, t0, L, xw + W - 1);
    load_run<T, VEC, P>(gr, t0, L, dp);
    if (silu) {
#pragma unroll
      for (int j = 0; j < P + W - 1; j++) {
        float p = b0;
#pragma unroll
        for (int k = 0; k < W; k++) p = fmaf(wk[k], xw[j + k], p);
        const float s = sigmoid_t<T>(p);
        dp[j] *= s * (1.f + p * (1.f - s));
      }
    }
    float o[P];
#pragma unroll
    for (int i = 0; i < P; i++) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < W; k++) s = fmaf(wk[k], dp[i + W - 1 - k], s);
      o[i] = s;
#pragma unroll
      for (int k = 0; k < W; k++) part[k] = fmaf(dp[i], xw[i + k], part[k]);
      part[W] += dp[i];
    }
    store_run<T, VEC, P>(dx + row * L, t0, L, o);
  }
  // The W+1 block sums in one pass: warp sums by shuffles, one barrier, then thread k adds the warps' k-th
  // values and does tap k's atomic. At L = 2048 a block has only two packs per thread (one row), and W+1
  // separate block_sum calls cost 2(W+1) = 10 barriers per block.
  constexpr int kWarps = kThreads / gpu::kWarpSize;
  const int lane = int(threadIdx.x) % gpu::kWarpSize, warp = int(threadIdx.x) / gpu::kWarpSize;
#pragma unroll
  for (int k = 0; k <= W; k++) part[k] = gpu::warp_sum(part[k]);
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k <= W; k++) red[warp][k] = part[k];
  }
  __syncthreads();
  const int k = int(threadIdx.x);
  if (k <= W) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kWarps; i++) s += red[i][k];
    if (k < W) atomicAdd(dw + d * W + k, s);
    else if (dbias) atomicAdd(dbias + d, s);
  }
}

// One thread per (b, d): window = [conv_state..., x], then the state rolls by one.
template <class T, int W>
__global__ void conv_update_kernel(const T* __restrict__ x, T* __restrict__ st, const float* __restrict__ w,
                                   const float* __restrict__ bias, bool silu, T* __restrict__ out, int64_t rows,
                                   int D) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int d = int(row % D);
  T* s = st + row * (W - 1);
  float p = bias ? bias[d] : 0.f;
#pragma unroll
  for (int k = 0; k < W - 1; k++) p = fmaf(w[d * W + k], to_f32(s[k]), p);
  p = fmaf(w[d * W + W - 1], to_f32(x[row]), p);
  out[row] = from_f32<T>(silu ? p * sigmoid_f(p) : p);
#pragma unroll
  for (int k = 0; k + 1 < W - 1; k++) s[k] = s[k + 1];
  s[W - 2] = x[row];
}

// Runs body with the compile-time kernel width KW (checked to be 2..4 by the front-end).
#define CONV_DISPATCH_W(w_, KW, ...)                  \
  switch (w_) {                                        \
    case 2: { constexpr int KW = 2; __VA_ARGS__; break; } \
    case 3: { constexpr int KW = 3; __VA_ARGS__; break; } \
    case 4: { constexpr int KW = 4; __VA_ARGS__; break; } \
    default: ANVIL_THROW("causal_conv1d", "W in {2, 3, 4}", w_); \
  }

const float* opt(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* opt_mut(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// The pack kernels index time in 32 bits and rows by blockIdx.x.
constexpr int64_t kMaxPackL = int64_t(1) << 30;
void check_pack_rows(int64_t rows, int64_t L) {
  ANVIL_CHECK(L <= kMaxPackL, "causal_conv1d (GPU)", str("L <= ", kMaxPackL), L);
  ANVIL_CHECK(rows <= int64_t(INT32_MAX), "causal_conv1d (GPU)", "B * D < 2^31 rows", rows);
}

}  // namespace

void causal_conv1d_fwd_gpu(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out) {
  const int64_t rows = x.size(0) * x.size(1), L = x.size(2);
  const int D = int(x.size(1)), W = int(w.size(1));
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = L % P == 0 && gpu::aligned16(x.data_ptr()) && gpu::aligned16(out.data_ptr());
    check_pack_rows(rows, L);
    const dim3 grid(unsigned(rows), unsigned(gpu::ceil_div(L, int64_t(kThreads) * P)));
    CONV_DISPATCH_W(W, KW, {
      auto kernel = vec ? conv_fwd_kernel<T, KW, true> : conv_fwd_kernel<T, KW, false>;
      kernel<<<grid, kThreads, 0, gpu::stream()>>>(x.data<T>(), w.data<float>(), opt(bias), silu, out.data<T>(), D,
                                                   int(L));
      ANVIL_LAUNCH_CHECK();
    });
  });
}

void causal_conv1d_bwd_gpu(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                           Tensor& dx, Tensor& dw, Tensor& dbias) {
  const int64_t rows = x.size(0) * x.size(1), L = x.size(2);
  const int D = int(x.size(1)), W = int(w.size(1));
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = L % P == 0 && gpu::aligned16(x.data_ptr()) && gpu::aligned16(dout.data_ptr()) &&
                     gpu::aligned16(dx.data_ptr());
    const int reps = conv_bwd_reps();
    check_pack_rows(rows, L);
    const dim3 grid(unsigned(rows), unsigned(gpu::ceil_div(L, int64_t(kThreads) * P * reps)));
    CONV_DISPATCH_W(W, KW, {
      auto kernel = vec ? conv_bwd_kernel<T, KW, true> : conv_bwd_kernel<T, KW, false>;
      kernel<<<grid, kThreads, 0, gpu::stream()>>>(dout.data<T>(), x.data<T>(), w.data<float>(), opt(bias), silu,
                                                   dx.data<T>(), dw.data<float>(), opt_mut(dbias), D, int(L), reps);
      ANVIL_LAUNCH_CHECK();
    });
  });
}

void causal_conv1d_update_gpu(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                              Tensor& out) {
  const int64_t rows = x.size(0) * x.size(1);
  const int D = int(x.size(1)), W = int(w.size(1));
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, {
    CONV_DISPATCH_W(W, KW, {
      conv_update_kernel<T, KW><<<gpu::ceil_div(rows, 128), 128, 0, gpu::stream()>>>(
          x.data<T>(), conv_state.data<T>(), w.data<float>(), opt(bias), silu, out.data<T>(), rows, D);
      ANVIL_LAUNCH_CHECK();
    });
  });
}

}  // namespace anvil
