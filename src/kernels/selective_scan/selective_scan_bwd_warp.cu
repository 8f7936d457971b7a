// GPU selective-scan backward, warp-per-channel variant (ANVIL_SCAN_BWD_VARIANT=0, the default): chunks from last
// to first, each recomputing its forward from the saved state of the chunk before, then the adjoint scanned
// backwards (selective_scan.cu's head comment and docs/mamba_kernels.md explain the plan).
#include "backends/gpu/common.cuh"
#include "kernels/elementwise/elementwise.h"
#include "kernels/selective_scan/scan_gpu.h"
#include "kernels/selective_scan/scan_warp.cuh"

namespace anvil {
namespace {

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
    // The state after chunk c-1: saved state c * (kChunk / every) - 1.
    const int64_t k_prev = int64_t(c) * (kChunk / p.every) - 1;
    const float h_chunk = c > 0 ? p.states[(ch.row * p.nstates + k_prev) * p.N + n] : 0.f;
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
      go[i] = go[i] * y[i] * s * (1.f + zv[i] * (1.f - s));  // dz; go is dead after this
      y[i] *= zv[i] * s;
      zv[i] = go[i];
    }
  }
  if (ch.valid && p.y) store_items<T, VEC, FULL>(static_cast<T*>(p.y) + p.y_rows.at(ch.b, ch.d), t0, L, y);
  if (ch.valid) {
    store_items<T, VEC, FULL>(static_cast<T*>(p.ddelta) + base, t0, L, raw);
    store_items<T, VEC, FULL>(static_cast<T*>(p.du) + base, t0, L, uv);
    if (z) store_items<T, VEC, FULL>(static_cast<T*>(p.dz) + p.z_rows.at(ch.b, ch.d), t0, L, zv);
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

}  // namespace

void selective_scan_bwd_gpu(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus, const Tensor& states, Tensor& du,
                            Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz,
                            Tensor& ddelta_bias, Tensor& out) {
  const int variant = selective_scan_bwd_variant();
  if (selective_scan_bwd_async_gpu(variant, dout, u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus, states,
                                   du, ddelta, dA, dB, dC, dD, dz, ddelta_bias, out))
    return;
  ScanBwdParams p;
  static_cast<ScanParams&>(p) = make_params(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus);
  p.dout = dout.data_ptr();
  p.states = states.data<float>();
  p.du = du.data_ptr();
  p.ddelta = ddelta.data_ptr();
  p.dz = dz.defined() ? dz.data_ptr() : nullptr;
  p.y = out.defined() ? out.data_ptr() : nullptr;
  p.z_rows = row_strides(dz, u), p.y_rows = row_strides(out, u);
  p.dA = dA.data<float>();
  p.dD = opt_mut<float>(dD);
  p.ddelta_bias = opt_mut<float>(ddelta_bias);
  const ScanGradAccum acc(dB, dC);
  p.dB = acc.dB.data<float>();
  p.dC = acc.dC.data<float>();
  const unsigned grid = unsigned(u.size(0) * p.G * p.blocks_per_group);
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    const bool vec = vec_ok<T>(p.L, {&u, &delta, &Bm, &Cm, &z, &dout, &du, &ddelta, &dz, &out});
    auto kernel = vec ? scan_bwd_kernel<T, true> : scan_bwd_kernel<T, false>;
    kernel<<<grid, kThreads, 0, gpu::stream()>>>(p);
    ANVIL_LAUNCH_CHECK();
  });
  acc.finish(dB, dC);
}

ScanGradAccum::ScanGradAccum(const Tensor& dB_out, const Tensor& dC_out)
    : dB(dB_out.dtype() == DType::f32 ? dB_out : Tensor::empty(dB_out.shape(), DType::f32, dB_out.device())),
      dC(dC_out.dtype() == DType::f32 ? dC_out : Tensor::empty(dC_out.shape(), DType::f32, dC_out.device())) {
  dB.zero_();
  dC.zero_();
}

void ScanGradAccum::finish(Tensor& dB_out, Tensor& dC_out) const {
  if (dB_out.dtype() == DType::f32) return;
  cast(dB, dB_out);
  cast(dC, dC_out);
}

}  // namespace anvil
