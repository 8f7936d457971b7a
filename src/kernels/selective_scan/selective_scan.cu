// GPU selective scan (Mamba-1), forward and backward (the decode step is selective_state_update.cu).
// docs/mamba_kernels.md explains the plan.
//
// One warp per channel (b, d); its lanes lie along time, each holding kItems = 512 / kWarpSize consecutive steps
// (16 on NVIDIA, 8 on AMD), so one pass of the warp covers one 512-step chunk — the same chunk on every backend,
// which is what makes the saved `states` (B, D, chunks, N) portable. A block is kWarps channels of one
// (batch, group): they read the same Bm/Cm rows, so 3 of 4 warps find them in L1 instead of L2.
// Per chunk and state n, the recurrence h_t = a_t h_{t-1} + b_t (a = exp(dt A), b = dt u B) is scanned
// in three levels: sequentially inside a lane, across the warp with a shuffle scan of the (a, b) operator,
// and across chunks through a carry kept in shared memory. The backward runs chunks from last to first: it
// recomputes the chunk's forward from the saved state of the chunk before, then scans the adjoint backwards.
#include <type_traits>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/selective_scan/scan_gpu.h"
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

// The host->kernel contract: flat pointers (typed in the kernel) and sizes.
struct ScanParams {
  const void *u, *delta, *Bm, *Cm, *z;
  const float *A, *D_skip, *delta_bias;
  int64_t L;
  int D, N, G, per_group, blocks_per_group, chunks;
  bool softplus;
};
struct ScanFwdParams : ScanParams {
  void* out;
  float* states;  // (B, D, chunks, N)
};
struct ScanBwdParams : ScanParams {
  const void* dout;
  const float* states;
  void *du, *ddelta, *dz;
  float *dA, *dD, *ddelta_bias;
  float *dB, *dC;  // f32 accumulators (B, G, N, L), zeroed by the host
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

// Forward of chunk c for this warp's channel: reads the carry h entering the chunk, writes the one leaving it.
template <class T, bool VEC, bool FULL>
__device__ __forceinline__ void fwd_chunk(const ScanFwdParams& p, const Channel& ch, const Rows<T>& r, int c,
                                          int lane, const float* carry_in, float* carry_out) {
  const int64_t L = p.L, t0 = int64_t(c) * kChunk + int64_t(lane) * kItems;
  float dt[kItems], du[kItems], y[kItems];
  load_items<T, VEC, FULL>(r.delta, t0, L, dt);
  step_sizes(p, ch, t0, dt);
  load_items<T, VEC, FULL>(r.u, t0, L, du);
  const float dskip = p.D_skip ? p.D_skip[ch.d] : 0.f;
  float sum_dt = 0.f;
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    y[i] = dskip * du[i];
    du[i] *= dt[i];
    sum_dt += dt[i];
  }
  for (int n = 0; n < p.N; n++) {
    const float A2 = r.A[n] * kLog2e;  // exp(dt A) = exp2(dt A log2 e): one MUFU.EX2 (ANVIL_EXP2_FTZ)
    float a[kItems], bv[kItems], cv[kItems];
    load_items<T, VEC, FULL>(r.Bg + int64_t(n) * L, t0, L, bv);
    // The lane's map h -> ha h + hb; ha, the product of its a, is the exponential of the sum.
    float ha = ANVIL_EXP2_FTZ(A2 * sum_dt), hb = 0.f;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
      a[i] = ANVIL_EXP2_FTZ(dt[i] * A2);
      bv[i] *= du[i];
      hb = fmaf(a[i], hb, bv[i]);
    }
    warp_scan_forward(ha, hb, lane);
    float pa = ANVIL_SHFL_UP(ha, 1, kW), pb = ANVIL_SHFL_UP(hb, 1, kW);
    if (lane == 0) pa = 1.f, pb = 0.f;
    float h = fmaf(pa, carry_in[n], pb);  // the state before this lane's first step
    load_items<T, VEC, FULL>(r.Cg + int64_t(n) * L, t0, L, cv);
#pragma unroll
    for (int i = 0; i < kItems; i++) {
      h = fmaf(a[i], h, bv[i]);
      y[i] = fmaf(cv[i], h, y[i]);
    }
    const float h_end = ANVIL_SHFL(h, kW - 1, kW);  // the state after the chunk's last step (padding is identity)
    if (lane == 0) {
      carry_out[n] = h_end;
      if (ch.valid) p.states[(ch.row * p.chunks + c) * p.N + n] = h_end;
    }
  }
  if (r.z) {
    float zv[kItems];
    load_items<T, VEC, FULL>(r.z, t0, L, zv);
#pragma unroll
    for (int i = 0; i < kItems; i++) y[i] *= zv[i] * sigmoid_f(zv[i]);
  }
  if (ch.valid) store_items<T, VEC, FULL>(static_cast<T*>(p.out) + ch.row * L, t0, L, y);
}

template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) scan_fwd_kernel(ScanFwdParams p) {
  __shared__ float carry[2][kWarps][kMaxN];  // h entering the chunk, double-buffered across chunks
  const int lane = int(threadIdx.x) % kW, warp = int(threadIdx.x) / kW;
  const Channel ch = channel_of(p);
  const Rows<T> r = rows_of<T>(p, ch, nullptr);
  for (int n = lane; n < p.N; n += kW) carry[0][warp][n] = 0.f;
  __syncthreads();
  for (int c = 0; c < p.chunks; c++) {
    const float* cin = carry[c & 1][warp];
    float* cout = carry[(c + 1) & 1][warp];
    if (int64_t(c + 1) * kChunk <= p.L) fwd_chunk<T, VEC, true>(p, ch, r, c, lane, cin, cout);
    else fwd_chunk<T, VEC, false>(p, ch, r, c, lane, cin, cout);
    __syncthreads();  // the carry written in chunk c is read by every lane in chunk c+1
  }
}

// Shared memory for the cross-warp sum of dB/dC: [warp][dB|dC][item][lane], rows padded by one float so both
// the lane-major writes and the time-major reads spread over the banks.
constexpr int kRedRow = kW + 1;
constexpr int kRedSize = kItems * kRedRow;
static_assert(kChunk % kThreads == 0 && kThreads % kItems == 0, "the dB/dC sum walks the chunk in whole blocks");

// Backward of chunk c for this warp's channel: reads the adjoint carry entering from chunk c+1 (q_in), writes
// the one for chunk c-1 (q_out), adds its share of dB/dC through `red`. Every warp of the block calls it for
// the same chunk (it holds block barriers).
template <class T, bool VEC, bool FULL>
__device__ __forceinline__ void bwd_chunk(const ScanBwdParams& p, const Channel& ch, const Rows<T>& r, int c,
                                          int lane, int warp, const float* q_in, float* q_out,
                                          float (*red)[2][kRedSize], float& dD_acc, float& ddb_acc) {
  const int64_t L = p.L, base = ch.row * L, t0 = int64_t(c) * kChunk + int64_t(lane) * kItems;
  const T *u = r.u, *delta = r.delta, *dout = r.dout, *z = r.z, *Bg = r.Bg, *Cg = r.Cg;
  const float* A = r.A;
  const int64_t bc = r.bc;
  const float dskip = p.D_skip ? p.D_skip[ch.d] : 0.f;
  float dt[kItems], du[kItems], dy[kItems], y[kItems], gB[kItems], dtw[kItems];
  load_items<T, VEC, FULL>(delta, t0, L, dt);
  step_sizes(p, ch, t0, dt);
  load_items<T, VEC, FULL>(u, t0, L, du);
  load_items<T, VEC, FULL>(dout, t0, L, dy);  // zero past L: padded steps send back nothing
  float sum_dt = 0.f;
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    y[i] = dskip * du[i];
    du[i] *= dt[i];
    sum_dt += dt[i];
    gB[i] = dtw[i] = 0.f;
    if (!ch.valid) dy[i] = 0.f;
  }
  if (z) {
    float zv[kItems];
    load_items<T, VEC, FULL>(z, t0, L, zv);
#pragma unroll
    for (int i = 0; i < kItems; i++) dy[i] *= zv[i] * sigmoid_f(zv[i]);
  }
  for (int n = 0; n < p.N; n++) {
    const float An = A[n], A2 = An * kLog2e;
    float a[kItems], h[kItems], bv[kItems], cv[kItems];
    load_items<T, VEC, FULL>(Bg + int64_t(n) * L, t0, L, bv);
    load_items<T, VEC, FULL>(Cg + int64_t(n) * L, t0, L, cv);
    // Forward again inside the chunk, from the state the forward saved at the end of chunk c-1.
    const float ha0 = ANVIL_EXP2_FTZ(A2 * sum_dt);
    float ha = ha0, hb = 0.f;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
      a[i] = ANVIL_EXP2_FTZ(dt[i] * A2);
      hb = fmaf(a[i], hb, du[i] * bv[i]);
    }
    warp_scan_forward(ha, hb, lane);
    float pa = ANVIL_SHFL_UP(ha, 1, kW), pb = ANVIL_SHFL_UP(hb, 1, kW);
    if (lane == 0) pa = 1.f, pb = 0.f;
    const float h_chunk = c > 0 ? p.states[(ch.row * p.chunks + c - 1) * p.N + n] : 0.f;
    const float h_in = fmaf(pa, h_chunk, pb);
    float hh = h_in;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
      hh = fmaf(a[i], hh, du[i] * bv[i]);
      h[i] = hh;
      y[i] = fmaf(cv[i], hh, y[i]);
      cv[i] *= dy[i];  // from here on cv is dy * C: what y_t sends back to h_t
    }
    // Adjoint: q_t = dL/dh_{t-1} through step t = a_t (dy_t C_t + q_{t+1}); a lane's map q -> ha0 q + qb.
    float qa = ha0, qb = 0.f;
#pragma unroll
    for (int i = kItems - 1; i >= 0; i--) qb = a[i] * (cv[i] + qb);
    warp_scan_backward(qa, qb, lane);
    const int nxt = lane + 1 < kW ? lane + 1 : lane;
    float na = ANVIL_SHFL(qa, nxt, kW), nb = ANVIL_SHFL(qb, nxt, kW);
    if (lane == kW - 1) na = 1.f, nb = 0.f;
    float q = fmaf(na, q_in[n], nb);  // dL/dh at this lane's last step from later steps
    float dA_acc = 0.f;
    float* rB = red[warp][0];
    float* rC = red[warp][1];
#pragma unroll
    for (int i = kItems - 1; i >= 0; i--) {
      const float G = cv[i] + q;  // dL/dh_t, all paths
      const float hp = i > 0 ? h[i - 1] : h_in;
      rC[i * kRedRow + lane] = dy[i] * h[i];
      rB[i * kRedRow + lane] = G * du[i];
      gB[i] = fmaf(G, bv[i], gB[i]);
      const float w = G * a[i] * hp;  // dL/d(dt A) at step t
      dtw[i] = fmaf(An, w, dtw[i]);
      dA_acc = fmaf(w, dt[i], dA_acc);
      q = a[i] * G;
    }
    const float q_start = ANVIL_SHFL(q, 0, kW);  // dL/dh before the chunk: the carry for chunk c-1
    dA_acc = gpu::warp_sum(dA_acc);
    if (lane == 0) {
      q_out[n] = q_start;
      if (ch.valid) atomicAdd(p.dA + int64_t(ch.d) * p.N + n, dA_acc);
    }
    __syncthreads();  // every warp's dB/dC rows are in `red`
    // Sum the kWarps channels and add into the (B, G, N, L) accumulators: one atomic per block, step, state.
    // Thread tid sums steps tid, tid + kThreads, ... of dB then dC; step t sits at slot (t % kItems, t / kItems).
    const int tid = int(threadIdx.x), slot0 = (tid % kItems) * kRedRow + tid / kItems;
    const int64_t t_first = int64_t(c) * kChunk + tid, off = bc + int64_t(n) * L + t_first;
#pragma unroll
    for (int j = 0; j < 2 * kChunk / kThreads; j++) {
      constexpr int kPer = kChunk / kThreads;  // passes per tensor
      const int which = j / kPer, t_rel = (j % kPer) * kThreads;
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; w++) s += red[w][which][slot0 + t_rel / kItems];
      if (FULL || t_first + t_rel < L) atomicAdd((which ? p.dC : p.dB) + off + t_rel, s);
    }
    __syncthreads();  // `red` is free again
  }
  // Per-step gradients. delta and u come back from memory (L1) instead of living in registers all chunk long.
  float raw[kItems], uv[kItems], zv[kItems];
  load_items<T, VEC, FULL>(delta, t0, L, raw);
  load_items<T, VEC, FULL>(u, t0, L, uv);
  if (z) load_items<T, VEC, FULL>(z, t0, L, zv);
  float go[kItems];
  if (z) load_items<T, VEC, FULL>(dout, t0, L, go);
  const float bias = p.delta_bias ? p.delta_bias[ch.d] : 0.f;
#pragma unroll
  for (int i = 0; i < kItems; i++) {
    const float x = raw[i] + bias;
    const float sg = p.softplus ? (x > 20.f ? 1.f : sigmoid_f(x)) : 1.f;  // d dt / d delta
    const float ddt = fmaf(gB[i], uv[i], dtw[i]) * sg;
    dD_acc = fmaf(dy[i], uv[i], dD_acc);
    ddb_acc += t0 + i < L ? ddt : 0.f;
    raw[i] = ddt;
    uv[i] = fmaf(gB[i], dt[i], dy[i] * dskip);
    if (z) {
      const float s = sigmoid_f(zv[i]);
      zv[i] = go[i] * y[i] * s * (1.f + zv[i] * (1.f - s));
    }
  }
  if (ch.valid) {
    store_items<T, VEC, FULL>(static_cast<T*>(p.ddelta) + base, t0, L, raw);
    store_items<T, VEC, FULL>(static_cast<T*>(p.du) + base, t0, L, uv);
    if (z) store_items<T, VEC, FULL>(static_cast<T*>(p.dz) + base, t0, L, zv);
  }
}

template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) scan_bwd_kernel(ScanBwdParams p) {
  __shared__ float qcarry[2][kWarps][kMaxN];  // adjoint entering the chunk from the later one
  __shared__ float red[kWarps][2][kRedSize];
  const int lane = int(threadIdx.x) % kW, warp = int(threadIdx.x) / kW;
  const Channel ch = channel_of(p);
  const Rows<T> r = rows_of<T>(p, ch, p.dout);
  for (int n = lane; n < p.N; n += kW) qcarry[0][warp][n] = 0.f;
  __syncthreads();
  float dD_acc = 0.f, ddb_acc = 0.f;
  for (int k = 0; k < p.chunks; k++) {  // chunks from last to first
    const int c = p.chunks - 1 - k;
    const float* q_in = qcarry[k & 1][warp];
    float* q_out = qcarry[(k + 1) & 1][warp];
    if (int64_t(c + 1) * kChunk <= p.L)
      bwd_chunk<T, VEC, true>(p, ch, r, c, lane, warp, q_in, q_out, red, dD_acc, ddb_acc);
    else
      bwd_chunk<T, VEC, false>(p, ch, r, c, lane, warp, q_in, q_out, red, dD_acc, ddb_acc);
  }
  dD_acc = gpu::warp_sum(dD_acc);
  ddb_acc = gpu::warp_sum(ddb_acc);
  if (lane == 0 && ch.valid) {
    if (p.dD) atomicAdd(p.dD + ch.d, dD_acc);
    if (p.ddelta_bias) atomicAdd(p.ddelta_bias + ch.d, ddb_acc);
  }
}

template <class T>
__global__ void f32_to_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = from_f32<T>(src[i]);
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
  p.chunks = int(selective_scan_chunks(p.L));
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

void selective_scan_fwd_gpu(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                            bool delta_softplus, Tensor& out, Tensor& states) {
  if (selective_scan_fwd_seq_gpu(selective_scan_variant(), u, delta, A, Bm, Cm, D_skip, z, delta_bias,
                                 delta_softplus, out, states))
    return;
  ScanFwdParams p;
  static_cast<ScanParams&>(p) = make_params(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus);
  p.out = out.data_ptr();
  p.states = states.data<float>();
  const unsigned grid = unsigned(u.size(0) * p.G * p.blocks_per_group);
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    const bool vec = vec_ok<T>(p.L, {&u, &delta, &Bm, &Cm, &z, &out});
    auto kernel = vec ? scan_fwd_kernel<T, true> : scan_fwd_kernel<T, false>;
    kernel<<<grid, kThreads, 0, gpu::stream()>>>(p);
    ANVIL_LAUNCH_CHECK();
  });
}

void selective_scan_bwd_gpu(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus, const Tensor& states, Tensor& du,
                            Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz,
                            Tensor& ddelta_bias) {
  if (selective_scan_bwd_seq_gpu(selective_scan_bwd_variant(), dout, u, delta, A, Bm, Cm, D_skip, z, delta_bias,
                                 delta_softplus, states, du, ddelta, dA, dB, dC, dD, dz, ddelta_bias))
    return;
  ScanBwdParams p;
  static_cast<ScanParams&>(p) = make_params(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus);
  p.dout = dout.data_ptr();
  p.states = states.data<float>();
  p.du = du.data_ptr();
  p.ddelta = ddelta.data_ptr();
  p.dz = dz.defined() ? dz.data_ptr() : nullptr;
  p.dA = dA.data<float>();
  p.dD = opt_mut<float>(dD);
  p.ddelta_bias = opt_mut<float>(ddelta_bias);
  // dB/dC sum over the D/G channels of a group: f32 accumulators (dB/dC themselves when they are f32).
  const bool f32 = dB.dtype() == DType::f32;
  Tensor dB32 = f32 ? dB : Tensor::empty(dB.shape(), DType::f32, dB.device());
  Tensor dC32 = f32 ? dC : Tensor::empty(dC.shape(), DType::f32, dC.device());
  dB32.zero_();
  dC32.zero_();
  p.dB = dB32.data<float>();
  p.dC = dC32.data<float>();
  const unsigned grid = unsigned(u.size(0) * p.G * p.blocks_per_group);
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    const bool vec = vec_ok<T>(p.L, {&u, &delta, &Bm, &Cm, &z, &dout, &du, &ddelta, &dz});
    auto kernel = vec ? scan_bwd_kernel<T, true> : scan_bwd_kernel<T, false>;
    kernel<<<grid, kThreads, 0, gpu::stream()>>>(p);
    ANVIL_LAUNCH_CHECK();
    if (!f32) {
      const int64_t n = dB.numel();
      f32_to_kernel<T><<<gpu::ceil_div(n, 256), 256, 0, gpu::stream()>>>(p.dB, dB.data<T>(), n);
      ANVIL_LAUNCH_CHECK();
      f32_to_kernel<T><<<gpu::ceil_div(n, 256), 256, 0, gpu::stream()>>>(p.dC, dC.data<T>(), n);
      ANVIL_LAUNCH_CHECK();
    }
  });
}

}  // namespace anvil
