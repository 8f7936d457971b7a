// GPU causal_conv1d, forward, backward and decode step.
// Forward grid: blockIdx.x = row (b*D + d, up to 2^31), blockIdx.y = segment of kThreads*P timesteps. Each thread
// owns P = 16/sizeof(T) consecutive timesteps (one 16-byte pack: 8 bf16) and reads the W-1 inputs before them
// with scalar loads; those sit in the neighbouring thread's pack, so they hit L1 and HBM sees each byte once:
// forward 2 bytes/element moved per dtype byte (x in, out out), backward 3 (x, dout in, dx out). The backward
// walks warp spans of a row instead (conv_bwd_span_kernel).
#include <algorithm>
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

// SiLU'(p) = s (1 + p (1 - s)), s = sigmoid(p), as s + s (p - p s): two FMAs after the sigmoid.
template <class T>
__device__ __forceinline__ float dsilu(float p) {
  const float s = sigmoid_t<T>(p);
  return fmaf(fmaf(-p, s, p), s, s);
}

// Backward by warp spans. A warp owns `span` consecutive chunks of kWarpSize packs of one row and walks them from
// last to first; a lane computes dpre on its own P steps only. The W-1 values after its pack come from lane+1 by
// a shuffle, and the last lane's from lane 0 of the chunk walked just before (the next one in time), carried in
// registers. The W-1 inputs before a pack come from lane-1 the same way; lane 0's are W-1 warp-uniform loads
// prefetched with the chunk. Only a span's two ends recompute a halo. The thread-per-pack backward it replaced
// recomputed W-1 = 3 of every 11 dpre (sigmoid, SiLU', 4 FMAs each) and made 9 scalar halo loads per pack, whose
// L1 latency held 25% of its stall samples (ncu, H200): 72% of copy against 82% now (docs/mamba_kernels.md,
// eighth round). No shared memory and no block barrier: dw and dbias are warp sums, one atomic per warp and tap.
template <class T, int W, bool VEC>
__global__ void __launch_bounds__(kThreads) conv_bwd_span_kernel(const T* __restrict__ dout, const T* __restrict__ x,
                                                                 const float* __restrict__ w,
                                                                 const float* __restrict__ bias, bool silu,
                                                                 T* __restrict__ dx, float* __restrict__ dw,
                                                                 float* __restrict__ dbias, int D, int L, int64_t rows,
                                                                 int span, int spans_per_row, int64_t dx_sb,
                                                                 int64_t dx_sd) {
  constexpr int P = gpu::Pack<T>::N, H = W - 1, WS = gpu::kWarpSize;
  static_assert(H <= P, "the halo lies within the neighbouring pack");
  const int lane = int(threadIdx.x) % WS;
  const int64_t gw = int64_t(blockIdx.x) * (kThreads / WS) + int(threadIdx.x) / WS;
  if (gw >= rows * spans_per_row) return;  // whole warps: nothing below synchronises the block
  const int64_t row = gw / spans_per_row;
  const int d = int(row % D);
  const int np = (L + P - 1) / P, nchunks = (np + WS - 1) / WS;
  const int c_begin = int(gw % spans_per_row) * span, c_end = min(c_begin + span, nchunks);
  if (c_begin >= c_end) return;
  const T* xr = x + row * L;
  const T* gr = dout + row * L;
  T* const dxr = dx + (row / D) * dx_sb + d * dx_sd;  // (B, D, L) or (D, B, L) order (causal_conv1d.h)
  float wk[W];
#pragma unroll
  for (int k = 0; k < W; k++) wk[k] = w[d * W + k];
  const float b0 = bias ? bias[d] : 0.f;
  // dpre at one step from scalar loads (zero past L): the H steps after the span, once per span.
  auto dpre_at = [&](int t) {
    if (t >= L) return 0.f;
    float p = b0;
#pragma unroll
    for (int k = 0; k < W; k++) p = fmaf(wk[k], t - H + k >= 0 ? to_f32(xr[t - H + k]) : 0.f, p);
    const float g = to_f32(gr[t]);
    return silu ? g * dsilu<T>(p) : g;
  };
  float carry[H];  // lane WS-1: dpre at the H steps after the current chunk
#pragma unroll
  for (int j = 0; j < H; j++) carry[j] = dpre_at(c_end * WS * P + j);
  float part[W + 1];  // dw taps, then dbias
#pragma unroll
  for (int k = 0; k <= W; k++) part[k] = 0.f;
  // VEC: the next chunk's packs stay raw (uint4) in flight while this one computes; loads come from a clamped
  // pack index and are zeroed at use past L.
  auto raw = [&](const T* r, int c) {
    return *reinterpret_cast<const uint4*>(r + int64_t(min(c * WS + lane, np - 1)) * P);
  };
  // The H inputs before a chunk (lane 0's halo): one address for the whole warp, raw until used, prefetched with
  // the chunk's packs.
  auto before = [&](int c, T* b) {
#pragma unroll
    for (int j = 0; j < H; j++) b[j] = c * WS * P - H + j >= 0 ? xr[c * WS * P - H + j] : from_f32<T>(0.f);
  };
  uint4 nx = make_uint4(0, 0, 0, 0), ng = nx;
  T nb[H];
  before(c_end - 1, nb);
  if constexpr (VEC) nx = raw(xr, c_end - 1), ng = raw(gr, c_end - 1);
  for (int c = c_end - 1; c >= c_begin; c--) {
    const int t0 = (c * WS + lane) * P;
    float xw[H + P];  // x[t0-H .. t0+P-1]
    float dp[P + H];  // dpre[t0 .. t0+P+H-1]
    T ub[H];
#pragma unroll
    for (int j = 0; j < H; j++) ub[j] = nb[j];
    if (c > c_begin) before(c - 1, nb);
    if constexpr (VEC) {
      const uint4 ux = nx, ug = ng;
      if (c > c_begin) nx = raw(xr, c - 1), ng = raw(gr, c - 1);
      const auto px = gpu::unpack<T>(ux), pg = gpu::unpack<T>(ug);
#pragma unroll
      for (int i = 0; i < P; i++) xw[H + i] = to_f32(px.v[i]), dp[i] = to_f32(pg.v[i]);
      // Lanes past the row (only in its last chunk; L % P == 0, so a pack is all in or all out) hold a copy of
      // the last pack: their dout must read as zero, since dpre past L is zero and feeds lane-1 and the sums.
      if ((c + 1) * WS > np && t0 >= L) {
#pragma unroll
        for (int i = 0; i < P; i++) dp[i] = 0.f;
      }
    } else {
      load_run<T, false, P>(xr, t0, L, xw + H);
      load_run<T, false, P>(gr, t0, L, dp);
    }
    // x before the pack: lane-1's last H, lane 0's from the prefetched halo.
#pragma unroll
    for (int j = 0; j < H; j++) {
      const float r = ANVIL_SHFL(xw[P + j], (lane + WS - 1) % WS, WS);
      xw[j] = lane == 0 ? to_f32(ub[j]) : r;
    }
    if (silu) {
#pragma unroll
      for (int i = 0; i < P; i++) {
        float p = b0;
#pragma unroll
        for (int k = 0; k < W; k++) p = fmaf(wk[k], xw[i + k], p);
        dp[i] *= dsilu<T>(p);
      }
    }
    // dpre after the pack: lane+1's first H; the last lane's from the carry, which becomes lane 0's.
#pragma unroll
    for (int j = 0; j < H; j++) {
      const float r = ANVIL_SHFL(dp[j], (lane + 1) % WS, WS);
      dp[P + j] = lane == WS - 1 ? carry[j] : r;
      carry[j] = r;
    }
    float o[P];
#pragma unroll
    for (int i = 0; i < P; i++) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < W; k++) s = fmaf(wk[k], dp[i + H - k], s);
      o[i] = s;
#pragma unroll
      for (int k = 0; k < W; k++) part[k] = fmaf(dp[i], xw[i + k], part[k]);
      part[W] += dp[i];
    }
    if (t0 < L) store_run<T, VEC, P>(dxr, t0, L, o);
  }
#pragma unroll
  for (int k = 0; k <= W; k++) part[k] = gpu::warp_sum(part[k]);
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < W; k++) atomicAdd(dw + d * W + k, part[k]);
    if (dbias) atomicAdd(dbias + d, part[W]);
  }
}

// Chunks (of kWarpSize packs) per warp span. A span's ends cost a recomputed halo from scalar loads that wait on
// memory: at the issue shape (B 4, D 5120, L 2048 bf16: 8 chunks per row) spans of 8, 4, 2 and 1 chunks measured
// 82%, 74%, 61% and 43% of copy on the H200. So spans are as long as the row allows while the grid keeps 64
// warps per SM (two waves of the 32 resident warps of this 64-register kernel). ANVIL_CONV_BWD_SPAN overrides it
// (read once).
int conv_bwd_span(int64_t rows, int nchunks) {
  static const int env = [] {
    const char* e = std::getenv("ANVIL_CONV_BWD_SPAN");
    return e && *e ? std::atoi(e) : 0;
  }();
  if (env >= 1) return std::min(env, nchunks);
  const int64_t target = int64_t(gpu::device_info(gpu::current_device()).compute_units) * 64;
  const int64_t spans = std::clamp<int64_t>(gpu::ceil_div(target, rows), 1, nchunks);
  return int(gpu::ceil_div(int64_t(nchunks), spans));
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
    check_pack_rows(rows, L);
      const int nchunks = int(gpu::ceil_div(gpu::ceil_div(L, int64_t(P)), int64_t(gpu::kWarpSize)));
      const int span = conv_bwd_span(rows, nchunks), spans = (nchunks + span - 1) / span;
      const int64_t blocks = gpu::ceil_div(rows * spans, int64_t(kThreads / gpu::kWarpSize));
      ANVIL_CHECK(blocks <= int64_t(INT32_MAX), "causal_conv1d backward (GPU)", "B * D * spans < 2^33", rows * spans);
      CONV_DISPATCH_W(W, KW, {
        auto kernel = vec ? conv_bwd_span_kernel<T, KW, true> : conv_bwd_span_kernel<T, KW, false>;
        kernel<<<unsigned(blocks), kThreads, 0, gpu::stream()>>>(dout.data<T>(), x.data<T>(), w.data<float>(),
                                                                 opt(bias), silu, dx.data<T>(), dw.data<float>(),
                                                                 opt_mut(dbias), D, int(L), rows, span, spans,
                                                                 dx.stride(0), dx.stride(1));
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
