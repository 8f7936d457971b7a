// GPU add_rms_norm, forward and backward. One block per row (forward) with 16-byte packed loads.
//
// Register path (C % P == 0 and C <= 4 * 512 packs = 16384 bf16): each thread keeps its K <= 4 packs of the
// rounded h in registers between the sum of squares and the output, so HBM sees each byte once: a, b, w
// read, h, y written. [8192, 4096] bf16 moves 4 x 64 MiB: 256 threads x K = 2 packs, up to 8 blocks per SM.
// One row of 4096 (decode) is one block whose loads are all issued before the single block reduction.
// Otherwise (odd C, unaligned views, huge C): two passes over the row, the second re-reading h (L2 hits).
//
// Backward: blocks stride over rows; with the register path a thread owns the same columns in every row,
// so w stays in registers and dw's partial sums too; each block then writes one partial row of dw, and a
// second kernel adds the G partial rows into dw (deterministic, no atomics).
#include <algorithm>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/elementwise/fp8_io.h"
#include "kernels/matmul/matmul.h"

namespace anvil {
namespace {

constexpr int kLoopThreads = 256;

// How a row of C columns maps onto a block: packs of P elements, K packs per thread, `threads` threads.
struct RowPlan {
  int K = 0;        // 0: no register path
  int threads = 0;  // a multiple of 64: whole wavefronts on both vendors
};
RowPlan plan_row(int C, int P, bool aligned) {
  if (C % P != 0 || !aligned) return {};
  const int packs = C / P;
  for (int K : {1, 2, 4}) {
    const int t = gpu::ceil_div(packs, K);
    if (t <= 256) return {K, std::max(64, (t + 63) / 64 * 64)};
  }
  if (packs <= 4 * 512) return {4, (gpu::ceil_div(packs, 4) + 63) / 64 * 64};
  return {};
}

// ---- forward ---------------------------------------------------------------------------------------------
// a, b and h may alias (in-place residual), so none of them is __restrict__.
template <class T, class TO, int K, int MAXT>
__global__ void __launch_bounds__(MAXT) add_rms_norm_fwd_reg_kernel(const T* a, const T* b, const T* __restrict__ w,
                                                                      float eps, T* h, TO* __restrict__ y,
                                                                      float* __restrict__ rstd,
                                                                      const float* __restrict__ y_scale, int C) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  __shared__ float scratch[gpu::kWarpSize];
  constexpr int P = gpu::Pack<T>::N;
  const int64_t off = int64_t(blockIdx.x) * C;
  float hv[K][P];
  gpu::Pack<T> wv[K];
  float ss = 0.f;
  // The FP8 scale is read with the row: a load after the block reduction cannot rise above its barriers and adds
  // a memory round trip to the one-row (decode) kernel.
  const float y_sc = is_fp8_type<TO> ? y_scale[0] : 1.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = (threadIdx.x + k * blockDim.x) * P;
    if (c < C) {
      const auto pa = gpu::load_pack(a + off + c), pb = gpu::load_pack(b + off + c);
      wv[k] = gpu::load_pack(w + c);  // issued now, used after the reduction
      gpu::Pack<T> ph;
#pragma unroll
      for (int i = 0; i < P; i++) {
        ph.v[i] = from_f32<T>(to_f32(pa.v[i]) + to_f32(pb.v[i]));
        hv[k][i] = to_f32(ph.v[i]);
        ss += hv[k][i] * hv[k][i];
      }
      gpu::store_pack(h + off + c, ph);
    }
  }
  ss = gpu::block_sum(ss, scratch);
  const float r = rsqrtf(ss / float(C) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  const float inv_scale = is_fp8_type<TO> ? 1.f / y_sc : 1.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = (threadIdx.x + k * blockDim.x) * P;
    if (c < C) {
      Vec<TO, P> o;
#pragma unroll
      for (int i = 0; i < P; i++) o.v[i] = from_f32<TO>(hv[k][i] * r * to_f32(wv[k].v[i]) * inv_scale);
      store_vec(y + off + c, o);
    }
  }
}

// Two passes; VEC moves 16-byte packs (C % P == 0, aligned), else single elements. Each thread re-reads in
// the second pass exactly the h elements it wrote in the first.
template <class T, class TO, bool VEC>
__global__ void __launch_bounds__(kLoopThreads) add_rms_norm_fwd_loop_kernel(const T* a, const T* b,
                                                                               const T* __restrict__ w, float eps,
                                                                               T* h, TO* __restrict__ y,
                                                                               float* __restrict__ rstd,
                                                                               const float* __restrict__ y_scale,
                                                                               int C) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  __shared__ float scratch[gpu::kWarpSize];
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int64_t off = int64_t(blockIdx.x) * C;
  float ss = 0.f;
  for (int c = threadIdx.x * P; c < C; c += kLoopThreads * P) {
    const auto pa = load_vec<T, P>(a + off + c), pb = load_vec<T, P>(b + off + c);
    Vec<T, P> ph;
#pragma unroll
    for (int i = 0; i < P; i++) {
      ph.v[i] = from_f32<T>(to_f32(pa.v[i]) + to_f32(pb.v[i]));
      ss += to_f32(ph.v[i]) * to_f32(ph.v[i]);
    }
    store_vec(h + off + c, ph);
  }
  ss = gpu::block_sum(ss, scratch);
  const float r = rsqrtf(ss / float(C) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  const float inv_scale = is_fp8_type<TO> ? 1.f / y_scale[0] : 1.f;
  for (int c = threadIdx.x * P; c < C; c += kLoopThreads * P) {
    const auto ph = load_vec<T, P>(h + off + c), pw = load_vec<T, P>(w + c);
    Vec<TO, P> o;
#pragma unroll
    for (int i = 0; i < P; i++) o.v[i] = from_f32<TO>(to_f32(ph.v[i]) * r * to_f32(pw.v[i]) * inv_scale);
    store_vec(y + off + c, o);
  }
}

// ---- backward --------------------------------------------------------------------------------------------
// dh = dh_in + r * (dy * w - hhat * mean(dy * w * hhat)),  hhat = h * r;  dw_part[block] = sum over its rows
// of dy * hhat. dh may be dh_in (each element is read before it is written).
template <class T, int K, int MAXT>
__global__ void __launch_bounds__(MAXT) add_rms_norm_bwd_reg_kernel(const T* __restrict__ dy, const T* dh_in,
                                                                      const T* __restrict__ h,
                                                                      const T* __restrict__ w,
                                                                      const float* __restrict__ rstd, T* dh,
                                                                      float* __restrict__ dw_part, int64_t N, int C) {
  __shared__ float scratch[gpu::kWarpSize];
  constexpr int P = gpu::Pack<T>::N;
  float wv[K][P], dwacc[K][P];
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = (threadIdx.x + k * blockDim.x) * P;
    gpu::Pack<T> pw;
    if (c < C) pw = gpu::load_pack(w + c);
#pragma unroll
    for (int i = 0; i < P; i++) {
      wv[k][i] = c < C ? to_f32(pw.v[i]) : 0.f;
      dwacc[k][i] = 0.f;
    }
  }
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const int64_t off = row * C;
    const float r = rstd[row];
    float g[K][P], hh[K][P], dot = 0.f;
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = (threadIdx.x + k * blockDim.x) * P;
      if (c < C) {
        const auto pg = gpu::load_pack(dy + off + c), ph = gpu::load_pack(h + off + c);
#pragma unroll
        for (int i = 0; i < P; i++) {
          g[k][i] = to_f32(pg.v[i]);
          hh[k][i] = to_f32(ph.v[i]) * r;
          dot += g[k][i] * wv[k][i] * hh[k][i];
        }
      }
    }
    dot = gpu::block_sum(dot, scratch) / float(C);
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = (threadIdx.x + k * blockDim.x) * P;
      if (c < C) {
        gpu::Pack<T> pr, o;
        if (dh_in) pr = gpu::load_pack(dh_in + off + c);
#pragma unroll
        for (int i = 0; i < P; i++) {
          const float resid = dh_in ? to_f32(pr.v[i]) : 0.f;
          o.v[i] = from_f32<T>(resid + r * (g[k][i] * wv[k][i] - hh[k][i] * dot));
          dwacc[k][i] += g[k][i] * hh[k][i];
        }
        gpu::store_pack(dh + off + c, o);
      }
    }
  }
  float* part = dw_part + int64_t(blockIdx.x) * C;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = (threadIdx.x + k * blockDim.x) * P;
    if (c < C) {
#pragma unroll
      for (int i = 0; i < P; i++) part[c + i] = dwacc[k][i];
    }
  }
}

// Any C, one element at a time; the block's dw partial row lives in global memory (L2-resident), each
// column touched only by the thread that owns it.
template <class T>
__global__ void __launch_bounds__(kLoopThreads) add_rms_norm_bwd_loop_kernel(const T* __restrict__ dy,
                                                                               const T* dh_in,
                                                                               const T* __restrict__ h,
                                                                               const T* __restrict__ w,
                                                                               const float* __restrict__ rstd, T* dh,
                                                                               float* __restrict__ dw_part, int64_t N,
                                                                               int C) {
  __shared__ float scratch[gpu::kWarpSize];
  float* part = dw_part + int64_t(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += kLoopThreads) part[c] = 0.f;
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const int64_t off = row * C;
    const float r = rstd[row];
    float dot = 0.f;
    for (int c = threadIdx.x; c < C; c += kLoopThreads) dot += to_f32(dy[off + c]) * to_f32(w[c]) * to_f32(h[off + c]);
    dot = gpu::block_sum(dot, scratch) * r / float(C);
    for (int c = threadIdx.x; c < C; c += kLoopThreads) {
      const float g = to_f32(dy[off + c]), hhat = to_f32(h[off + c]) * r;
      const float resid = dh_in ? to_f32(dh_in[off + c]) : 0.f;
      dh[off + c] = from_f32<T>(resid + r * (g * to_f32(w[c]) - hhat * dot));
      part[c] += g * hhat;
    }
  }
}

}  // namespace

void add_rms_norm_fwd_gpu(const Tensor& a, const Tensor& b, const Tensor& w, float eps, Tensor& h, Tensor& y,
                          Tensor& rstd, const Tensor& y_scale) {
  const int C = int(a.size(-1));
  const int64_t N = a.numel() / C;
  const float* scale = y_scale.defined() ? y_scale.data<float>() : nullptr;
  const bool aligned = gpu::aligned16(a.data_ptr()) && gpu::aligned16(b.data_ptr()) && gpu::aligned16(w.data_ptr()) &&
                       gpu::aligned16(h.data_ptr()) && gpu::aligned16(y.data_ptr());
  ANVIL_CHECK(N <= INT32_MAX, "add_rms_norm_fwd", "fewer than 2^31 rows (one block each)", N);
  ANVIL_DISPATCH_FLOAT(a.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const RowPlan plan = plan_row(C, P, aligned);
    ANVIL_DISPATCH_OUT(y.dtype(), T, TO, {
      auto kernel = add_rms_norm_fwd_loop_kernel<T, TO, false>;
      int threads = kLoopThreads;
      if (plan.K == 0 && C % P == 0 && aligned) kernel = add_rms_norm_fwd_loop_kernel<T, TO, true>;
      else if (plan.K == 1) kernel = add_rms_norm_fwd_reg_kernel<T, TO, 1, 256>;
      else if (plan.K == 2) kernel = add_rms_norm_fwd_reg_kernel<T, TO, 2, 256>;
      else if (plan.K == 4 && plan.threads <= 256) kernel = add_rms_norm_fwd_reg_kernel<T, TO, 4, 256>;
      else if (plan.K == 4) kernel = add_rms_norm_fwd_reg_kernel<T, TO, 4, 512>;
      if (plan.K) threads = plan.threads;
      kernel<<<unsigned(N), threads, 0, gpu::stream()>>>(a.data<T>(), b.data<T>(), w.data<T>(), eps, h.data<T>(),
                                                         y.data<TO>(), rstd.data<float>(), scale, C);
      ANVIL_LAUNCH_CHECK();
    });
  });
}

void add_rms_norm_bwd_gpu(const Tensor& dy, const Tensor& dh_in, const Tensor& h, const Tensor& w,
                          const Tensor& rstd, Tensor& dh, Tensor& dw) {
  const int C = int(h.size(-1));
  const int64_t N = h.numel() / C;
  const bool aligned = gpu::aligned16(dy.data_ptr()) && gpu::aligned16(h.data_ptr()) && gpu::aligned16(w.data_ptr()) &&
                       gpu::aligned16(dh.data_ptr()) && (!dh_in.defined() || gpu::aligned16(dh_in.data_ptr()));
  const int sms = gpu::device_info(gpu::current_device()).compute_units;
  ANVIL_DISPATCH_FLOAT(h.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    // The register path keeps w, dy, h*r and dw's partials (4K packs of f32): up to 256 threads, where the
    // compiler may use 255 registers per thread; wider rows take the loop kernel.
    RowPlan plan = plan_row(C, P, aligned);
    if (plan.threads > 256) plan = {};
    const int threads = plan.K ? plan.threads : kLoopThreads;
    auto kernel = add_rms_norm_bwd_loop_kernel<T>;
    if (plan.K == 1) kernel = add_rms_norm_bwd_reg_kernel<T, 1, 256>;
    else if (plan.K == 2) kernel = add_rms_norm_bwd_reg_kernel<T, 2, 256>;
    else if (plan.K == 4) kernel = add_rms_norm_bwd_reg_kernel<T, 4, 256>;
    // As many blocks as are resident at once: a block walks its rows one at a time with one block reduction per
    // row, so the bytes in flight per SM are (resident blocks) x (a row's loads). At a fixed 2 blocks per SM,
    // Mamba-130m's rows (C = 768: 128 threads, 96 busy) kept ~9 KB in flight per SM and ran at 27% of copy
    // bandwidth (175 µs for 32768 rows on the H200). dw has one partial row per block (G x C f32, summed after).
    int per_sm = 0;
    ANVIL_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    const int G = int(std::min<int64_t>(N, int64_t(std::max(per_sm, 1)) * sms));
    Tensor part = Tensor::empty({G, C}, DType::f32, h.device());
    const T* resid = dh_in.defined() ? dh_in.data<T>() : nullptr;
    kernel<<<G, threads, 0, gpu::stream()>>>(dy.data<T>(), resid, h.data<T>(), w.data<T>(), rstd.data<float>(),
                                             dh.data<T>(), part.data<float>(), N, C);
    ANVIL_LAUNCH_CHECK();
    matmul_dbias_gpu(part, dw);  // dw += column sums of the G partial rows (two passes, deterministic)
  });
}

}  // namespace anvil
