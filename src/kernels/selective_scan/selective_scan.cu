// GPU selective scan (Mamba-1), warp-per-channel forward (the backward is selective_scan_bwd_warp.cu, the decode
// step selective_state_update.cu, the sequential variants selective_scan_fwd_seq.cu and
// selective_scan_bwd_async.cu). docs/mamba_kernels.md explains.
//
// One warp per channel (b, d); its lanes lie along time, each holding kItems = 512 / kWarpSize consecutive steps
// (16 on NVIDIA, 8 on AMD), so one pass of the warp covers one 512-step chunk — the same chunk on every backend,
// which is what makes the saved `states` (B, D, nstates, N) portable. A block is kWarps channels of one
// (batch, group): they read the same Bm/Cm rows, so 3 of 4 warps find them in L1 instead of L2.
// Per chunk and state n, the recurrence h_t = a_t h_{t-1} + b_t (a = exp(dt A), b = dt u B) is scanned
// in three levels: sequentially inside a lane, across the warp with a shuffle scan of the (a, b) operator,
// and across chunks through a carry kept in shared memory. The backward runs chunks from last to first: it
// recomputes the chunk's forward from the saved state of the chunk before, then scans the adjoint backwards.

#include "backends/gpu/common.cuh"
#include "kernels/selective_scan/scan_gpu.h"
#include "kernels/selective_scan/scan_warp.cuh"

namespace anvil {
namespace {

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
    // The saved states: a lane whose last step ends an interval of p.every steps holds it (steps past L are the
    // identity, so the lane ending the last interval holds the state after step L-1).
    const int64_t te = t0 + kItems;
    if (ch.valid && te % p.every == 0 && (te - 1) / p.every < p.nstates)
      p.states[(ch.row * p.nstates + (te - 1) / p.every) * p.N + n] = h;
    const float h_end = ANVIL_SHFL(h, kW - 1, kW);  // the state after the chunk's last step (padding is identity)
    if (lane == 0) carry_out[n] = h_end;
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


}  // namespace anvil
