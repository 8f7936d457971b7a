// Internal to the warp-per-channel selective-scan kernels (selective_scan.cu: forward, selective_scan_bwd_warp.cu:
// backward): the work split, the params, and the per-lane helpers both directions use. selective_scan.cu's head
// comment explains the plan.
#pragma once
#include <type_traits>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {


constexpr int kW = gpu::kWarpSize;
constexpr int kChunk = int(kSelectiveScanChunk);
constexpr int kItems = kChunk / kW;       // steps per lane: 16 (warp 32) or 8 (wavefront 64)
constexpr int kWarps = 4;                 // channels per block
constexpr int kThreads = kWarps * kW;     // 128 or 256
constexpr int kMaxN = int(kSelectiveScanMaxN);
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kChunk % kW == 0 && kItems % 8 == 0, "a lane's steps must be whole 16-byte packs of bf16");
static_assert(kChunk % kSelectiveScanTileEvery == 0 && kSelectiveScanTileEvery % kItems == 0,
              "saved states fall on lane ends inside a chunk");

// The host->kernel contract: flat pointers (typed in the kernel) and sizes.
struct ScanParams {
  const void *u, *delta, *Bm, *Cm, *z;
  const float *A, *D_skip, *delta_bias;
  int64_t L;
  int D, N, G, per_group, blocks_per_group, chunks;
  int nstates, every;  // saved states per channel, steps between them (selective_scan.h)
  bool softplus;
};
struct ScanFwdParams : ScanParams {
  void* out;
  float* states;  // (B, D, nstates, N)
};
struct ScanBwdParams : ScanParams {
  const void* dout;
  const float* states;
  void *du, *ddelta, *dz;
  float *dA, *dD, *ddelta_bias;
  float *dB, *dC;  // f32 accumulators (B, G, N, L), zeroed by the host
  void* y;         // the forward's output, recomputed (optional)
  RowStrides z_rows, y_rows;  // where dz's and y's rows start: (B, D, L) or (D, B, L) order
};

// Which channel this warp owns. Warps past the end of their group still run (block barriers need every warp)
// on the group's first channel, with `valid` false: they store nothing and contribute zeros.
struct Channel {
  int b, g, d;
  bool valid;
  int64_t row;  // b * D + d
};
__device__ __forceinline__ Channel channel_of(const ScanParams& p) {
  const int blk = blockIdx.x, j = blk % p.blocks_per_group, bg = blk / p.blocks_per_group;
  Channel c;
  c.g = bg % p.G;
  c.b = bg / p.G;
  const int k = j * kWarps + int(threadIdx.x) / kW;
  c.valid = k < p.per_group;
  c.d = c.g * p.per_group + (c.valid ? k : 0);
  c.row = int64_t(c.b) * p.D + c.d;
  return c;
}

// A 16-byte pack to f32. bf16 pairs are split with one shift or one mask each: element-wise to_f32 compiles to
// an extract and a shift per value (3 instructions with the moves), and Bm/Cm are unpacked D*N times per token.
template <class T>
__device__ __forceinline__ void unpack(const gpu::Pack<T>& pk, float* v) {
  if constexpr (std::is_same_v<T, bf16>) {
    uint32_t w[gpu::Pack<T>::N / 2];
    __builtin_memcpy(w, pk.v, sizeof(w));
#pragma unroll
    for (int k = 0; k < gpu::Pack<T>::N / 2; k++) {
      v[2 * k] = __uint_as_float(w[k] << 16);
      v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < gpu::Pack<T>::N; i++) v[i] = to_f32(pk.v[i]);
  }
}

template <class T>
__device__ __forceinline__ void load_packed(const T* __restrict__ r, float* v) {
  constexpr int P = gpu::Pack<T>::N;
#pragma unroll
  for (int k = 0; k < kItems / P; k++) unpack(gpu::load_pack(r + k * P), v + k * P);
}
template <class T>
__device__ __forceinline__ void store_packed(T* __restrict__ r, const float* v) {
  constexpr int P = gpu::Pack<T>::N;
#pragma unroll
  for (int k = 0; k < kItems / P; k++) {
    gpu::Pack<T> pk;
#pragma unroll
    for (int i = 0; i < P; i++) pk.v[i] = from_f32<T>(v[k * P + i]);
    gpu::store_pack(r + k * P, pk);
  }
}

// kItems consecutive steps from t0: 16-byte packs when VEC and the run lies inside L, else guarded scalars.
// FULL: the whole chunk lies inside L (every chunk but the last), so no test at all in the inner loops.
template <class T, bool VEC, bool FULL = false>
__device__ __forceinline__ void load_items(const T* __restrict__ r, int64_t t0, int64_t L, float* v) {
  if constexpr (VEC && FULL) {
    load_packed(r + t0, v);
  } else if (VEC && t0 + kItems <= L) {
    load_packed(r + t0, v);
  } else {
#pragma unroll
    for (int i = 0; i < kItems; i++) v[i] = t0 + i < L ? to_f32(r[t0 + i]) : 0.f;
  }
}
template <class T, bool VEC, bool FULL = false>
__device__ __forceinline__ void store_items(T* __restrict__ r, int64_t t0, int64_t L, const float* v) {
  if constexpr (VEC && FULL) {
    store_packed(r + t0, v);
  } else if (VEC && t0 + kItems <= L) {
    store_packed(r + t0, v);
  } else {
#pragma unroll
    for (int i = 0; i < kItems; i++)
      if (t0 + i < L) r[t0 + i] = from_f32<T>(v[i]);
  }
}

__device__ __forceinline__ float softplus_f(float v) { return v > 20.f ? v : log1pf(expf(v)); }
__device__ __forceinline__ float sigmoid_f(float v) { return 1.f / (1.f + expf(-v)); }

// Inclusive scan over the lanes of (a, b) under "earlier then later": (a1,b1);(a2,b2) = (a1 a2, a2 b1 + b2).
// Written for any warp width: the loop runs log2(kWarpSize) rounds (5 on NVIDIA, 6 on AMD).
__device__ __forceinline__ void warp_scan_forward(float& a, float& b, int lane) {
#pragma unroll
  for (int o = 1; o < kW; o <<= 1) {
    const float ap = ANVIL_SHFL_UP(a, o, kW), bp = ANVIL_SHFL_UP(b, o, kW);
    if (lane >= o) {
      b = fmaf(a, bp, b);
      a *= ap;
    }
  }
}
// The same from the last lane down (a suffix scan), for the adjoint that runs backwards in time:
// lane l's map q -> a q + b composed with the maps of lanes l+1 .. kWarpSize-1.
__device__ __forceinline__ void warp_scan_backward(float& a, float& b, int lane) {
#pragma unroll
  for (int o = 1; o < kW; o <<= 1) {
    const bool in = lane + o < kW;
    const int src = in ? lane + o : lane;
    const float an = ANVIL_SHFL(a, src, kW), bn = ANVIL_SHFL(b, src, kW);
    if (in) {
      b = fmaf(a, bn, b);
      a *= an;
    }
  }
}

// The step sizes of a lane's items: dt = softplus(delta + bias) or delta + bias; zero past L, so padded steps
// are the identity (a = 1, b = 0) and carry the state through unchanged.
__device__ __forceinline__ void step_sizes(const ScanParams& p, const Channel& ch, int64_t t0, float* dt) {
  const float bias = p.delta_bias ? p.delta_bias[ch.d] : 0.f;
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    float v = dt[i] + bias;
    if (p.softplus) v = softplus_f(v);
    dt[i] = t0 + i < p.L ? v : 0.f;
  }
}

// One warp's channel: its rows of every input (Bm/Cm: the (N, L) rows of its batch and group).
template <class T>
struct Rows {
  const T *u, *delta, *z, *dout, *Bg, *Cg;
  const float* A;
  int64_t bc;  // offset of the (N, L) rows in Bm/Cm and in dB/dC
};
template <class T>
__device__ __forceinline__ Rows<T> rows_of(const ScanParams& p, const Channel& ch, const void* dout) {
  const int64_t base = ch.row * p.L;
  Rows<T> r;
  r.u = static_cast<const T*>(p.u) + base;
  r.delta = static_cast<const T*>(p.delta) + base;
  r.z = p.z ? static_cast<const T*>(p.z) + base : nullptr;
  r.dout = dout ? static_cast<const T*>(dout) + base : nullptr;
  r.bc = (int64_t(ch.b) * p.G + ch.g) * p.N * p.L;
  r.Bg = static_cast<const T*>(p.Bm) + r.bc;
  r.Cg = static_cast<const T*>(p.Cm) + r.bc;
  r.A = p.A + int64_t(ch.d) * p.N;
  return r;
}


template <class T>
const T* opt(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }
template <class T>
T* opt_mut(Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

// Fills the shared part of the params; returns the grid size (blocks).
ScanParams make_params(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                       const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias, bool softplus) {
  ScanParams p;
  p.u = u.data_ptr();
  p.delta = delta.data_ptr();
  p.Bm = Bm.data_ptr();
  p.Cm = Cm.data_ptr();
  p.z = z.defined() ? z.data_ptr() : nullptr;
  p.A = A.data<float>();
  p.D_skip = opt<float>(D_skip);
  p.delta_bias = opt<float>(delta_bias);
  p.L = u.size(2);
  p.D = int(u.size(1));
  p.N = int(A.size(1));
  p.G = int(Bm.size(1));
  p.per_group = p.D / p.G;
  p.blocks_per_group = gpu::ceil_div(p.per_group, kWarps);
  p.chunks = int((p.L + kChunk - 1) / kChunk);
  p.nstates = int(selective_scan_states(p.L, p.N));
  p.every = int(selective_scan_state_every(p.N));
  p.softplus = softplus;
  return p;
}

// 16-byte loads need every (B, D, L) and (B, G, N, L) row to start on 16 bytes: L a multiple of the pack.
template <class T>
bool vec_ok(int64_t L, std::initializer_list<const Tensor*> ts) {
  bool ok = L % gpu::Pack<T>::N == 0;
  for (const Tensor* t : ts) ok = ok && (!t->defined() || gpu::aligned16(t->data_ptr()));
  return ok;
}

}  // namespace
}  // namespace anvil
