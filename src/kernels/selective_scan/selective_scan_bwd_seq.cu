// GPU selective-scan backward, "sequential" variant (ANVIL_SCAN_BWD_VARIANT=1): the mirror of
// selective_scan_fwd_seq.cu. One thread per (channel, 4 states) walks time backwards; no scans across lanes.
// docs/mamba_kernels.md has the counts behind it.
//
// The adjoint runs backwards and needs h_{t-1} at every step, which only a forward pass gives (dividing by a_t
// would amplify rounding by 1/a). So, per 512-step chunk c, from last to first:
//   phase 1: forward over the chunk from states[c-1], writing h at each 32-step tile start into a per-block
//            scratch (20 MB at the target shape: 640 blocks x 16 tiles x 128 threads x 16 B, mostly L2);
//   phase 2: tiles from last to first; per tile, forward over its first 24 steps from the tile's checkpoint,
//            keeping h every 8 steps in shared memory, then 8-step sub-tiles from last to first: recompute the
//            sub-tile with a and h in registers (8 x 4 each), then the adjoint over its 8 steps.
// Exponentials per (step, state): 15/16 + 24/32 + 1 = 2.7 (the forward has 1).
// Adjoint per (step, state): G = C dy + q, dC += dy h, dB += G dt u, gB += G B, q = a G, w = q h_{t-1},
// dtw += A w, dA += w dt. dB and dC sum over the block's 32 channels in shared memory (one f32 atomic per
// (block, step, state)); gB, dtw and y sum over the channel's 4 lanes in shared memory; both every 4 steps,
// when the same 128 threads turn into reducers: thread (s, n, dB|dC) sums 32 channels, thread (channel, s)
// finishes du, ddelta, dz of one step.
#include <cstdlib>
#include <initializer_list>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/selective_scan/scan_gpu.h"
#include "kernels/selective_scan/scan_seq.cuh"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {
using namespace scan_seq;

constexpr int kTT = 32;                     // steps per staged tile (as the forward)
constexpr int kNP = 16;                     // states per channel (N <= 16; padded with A = B = C = 0)
constexpr int kCB = 32;                     // channels per block
constexpr int kQ = 4;                       // lanes per channel
constexpr int kS = kNP / kQ;                // states per lane: one float4
constexpr int kThreads = kCB * kQ;          // 128
constexpr int kSub = 8;                     // steps per recomputed sub-tile (a, h in registers)
constexpr int kHalf = 4;                    // steps per reduction round
constexpr int kChunk = int(kSelectiveScanChunk);
constexpr int kTiles = kChunk / kTT;        // 16 checkpoints per chunk
constexpr int kSubs = kTT / kSub;           // 4 sub-tiles per tile
constexpr int kRedS = 2 * kCB * kNP + 8;    // dC|dB of one step; +8 floats: 4 steps x 8 states on 32 banks
constexpr int kPPS = 3 * kQ * kHalf + 4;    // (gB, dtw, y) x lane x step of one channel; +4: 8 channels apart
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(kS == 4 && kQ == kHalf && kThreads == 2 * kNP * kHalf && kThreads == kCB * kHalf, "reducer roles cover 128");

struct BwdSeqParams {
  const void *u, *delta, *Bm, *Cm, *z, *dout;
  void *du, *ddelta, *dz;
  const float *A, *D_skip, *delta_bias, *states;
  float *dA, *dD, *ddelta_bias, *dB, *dC;  // dB, dC: f32 accumulators (B, G, N, L), zeroed by the host
  float4* ck;                              // tile checkpoints: (blocks, kTiles, kThreads)
  int64_t L;
  int D, N, G, per_group, blocks_per_group, chunks;
  bool softplus;
};

struct alignas(16) BwdSmem {
  float B[kTT][kNP], C[kTT][kNP];
  float4 d[kCB][kTT + 1];          // (dt, dt*u, dy, u) per channel and step; +1: 8 channels on 8 bank quads
  float2 e[kCB][kTT + 1];          // (d dt/d delta, dout * silu'(z)) per channel and step
  float4 sub[kSubs - 1][kThreads]; // h at steps 8, 16, 24 of the tile, per thread
  float red[kHalf][kRedS];         // [step][dC|dB][channel][state]
  float pp[kCB][kPPS];             // [channel][gB|dtw|y][lane][step]
};

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void unpack4(const float4& v, float* o) { o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w; }

template <class T, bool VEC>
__global__ void ANVIL_LAUNCH_BOUNDS(kThreads, 3) scan_bwd_seq_kernel(BwdSeqParams p) {
  constexpr int P = gpu::Pack<T>::N;
  constexpr int PPC = kTT / P;                  // packs per channel row and tile
  constexpr int KC = kCB * PPC / kThreads;      // channel packs per thread and tensor
  constexpr int NBC = 2 * kNP * PPC;            // Bm and Cm packs per tile
  constexpr int KB = (NBC + kThreads - 1) / kThreads;
  static_assert(kCB * PPC % kThreads == 0, "tile shape");
  extern __shared__ float4 smem_raw[];
  BwdSmem& sm = *reinterpret_cast<BwdSmem*>(smem_raw);

  const int tid = int(threadIdx.x);
  const int blk = int(blockIdx.x), jb = blk % p.blocks_per_group, bg = blk / p.blocks_per_group;
  const int g = bg % p.G, b = bg / p.G, ch0 = jb * kCB;
  const int64_t L = p.L;
  const int64_t bc = (int64_t(b) * p.G + g) * p.N * L;
  const T* Bg = static_cast<const T*>(p.Bm) + bc;
  const T* Cg = static_cast<const T*>(p.Cm) + bc;
  const T* U = static_cast<const T*>(p.u);
  const T* Dl = static_cast<const T*>(p.delta);
  const T* Z = static_cast<const T*>(p.z);
  const T* GO = static_cast<const T*>(p.dout);

  // Compute role (and per-step reducer role): channel cc, states q*4 .. q*4+3.
  const int q = tid % kQ, cc = tid / kQ;
  const bool valid = ch0 + cc < p.per_group;
  const int d = g * p.per_group + (valid ? ch0 + cc : 0);
  const int64_t row = int64_t(b) * p.D + d;
  const float dskip = p.D_skip ? p.D_skip[d] : 0.f;
  float A2[kS], qc[kS], dA[kS];
#pragma unroll
  for (int j = 0; j < kS; j++) {
    const int n = q * kS + j;
    A2[j] = n < p.N ? p.A[int64_t(d) * p.N + n] * kLog2e : 0.f;
    qc[j] = dA[j] = 0.f;  // qc: a_{t+1} G_{t+1}, what the later steps send back to h_t
  }
  float dD_acc = 0.f, ddb_acc = 0.f;
  // dB/dC reducer role: step rs of the round, state rn, rw = 0 (dC) or 1 (dB).
  const int rs = tid % kHalf, rn = (tid / kHalf) % kNP, rw = tid / (kHalf * kNP);

  // Staging role: channel packs k = tid + i*kThreads -> channel k / PPC, pack k % PPC of the tile.
  int64_t srow[KC];
  bool sval[KC];
  float sbias[KC];
#pragma unroll
  for (int i = 0; i < KC; i++) {
    const int sc = (tid + i * kThreads) / PPC;
    sval[i] = ch0 + sc < p.per_group;
    const int sd = g * p.per_group + (sval[i] ? ch0 + sc : 0);
    srow[i] = (int64_t(b) * p.D + sd) * L;
    sbias[i] = p.delta_bias ? p.delta_bias[sd] : 0.f;
  }
  gpu::Pack<T> nu[KC], nd[KC], nz[KC], ng[KC], nbc[KB];  // the next tile, in flight
  // full: phase 2 also needs Cm, z and dout; phase 1 only delta, u and Bm.
  auto prefetch = [&](int kt, bool full) {
    const int64_t tt = int64_t(kt) * kTT;
#pragma unroll
    for (int i = 0; i < KC; i++) {
      const int64_t t0 = tt + ((tid + i * kThreads) % PPC) * P;
      nu[i] = sval[i] ? load_pack_at<T, VEC>(U + srow[i], t0, L) : zero_pack<T>();
      nd[i] = sval[i] ? load_pack_at<T, VEC>(Dl + srow[i], t0, L) : zero_pack<T>();
      nz[i] = full && Z && sval[i] ? load_pack_at<T, VEC>(Z + srow[i], t0, L) : zero_pack<T>();
      ng[i] = full && sval[i] ? load_pack_at<T, VEC>(GO + srow[i], t0, L) : zero_pack<T>();
    }
#pragma unroll
    for (int i = 0; i < KB; i++) {
      const int m = tid + i * kThreads, n = (m % (kNP * PPC)) / PPC;
      const int64_t t0 = tt + (m % PPC) * P;
      const bool isB = m < kNP * PPC;
      nbc[i] = m < NBC && n < p.N && (isB || full) ? load_pack_at<T, VEC>((isB ? Bg : Cg) + int64_t(n) * L, t0, L)
                                                   : zero_pack<T>();
    }
  };
  auto stage = [&](int kt, bool full) {  // full: phase 2 (phase 1 reads only dt, dt*u and Bm)
    const int64_t tt = int64_t(kt) * kTT;
#pragma unroll
    for (int i = 0; i < KC; i++) {
      const int sc = (tid + i * kThreads) / PPC, sp = (tid + i * kThreads) % PPC;
#pragma unroll
      for (int e = 0; e < P; e++) {
        const float uu = to_f32(nu[i].v[e]), zz = to_f32(nz[i].v[e]), go = to_f32(ng[i].v[e]);
        const float v = to_f32(nd[i].v[e]) + sbias[i];
        float dt = v, sg = 1.f;
        if (p.softplus) dt = softplus_t<T>(v), sg = full && v <= 20.f ? sigmoid_t<T>(v) : 1.f;
        if (tt + sp * P + e >= L) dt = 0.f;  // past L: the identity step (dout, u, z load as zero there)
        float dy = go, dzf = 0.f;
        if (full && Z) {
          const float s = sigmoid_t<T>(zz);
          dy = go * zz * s;                    // dL/dy = dout * silu(z)
          dzf = go * s * fmaf(zz, 1.f - s, 1.f);  // dL/dz = dzf * y
        }
        sm.d[sc][sp * P + e] = make_float4(dt, dt * uu, dy, uu);
        sm.e[sc][sp * P + e] = make_float2(sg, dzf);
      }
    }
#pragma unroll
    for (int i = 0; i < KB; i++) {
      const int m = tid + i * kThreads;
      if (m < NBC) {
        const int n = (m % (kNP * PPC)) / PPC, sp = m % PPC;
        float(*dst)[kNP] = m < kNP * PPC ? sm.B : sm.C;
#pragma unroll
        for (int e = 0; e < P; e++) dst[sp * P + e][n] = to_f32(nbc[i].v[e]);
      }
    }
  };
  // h through steps [t0, t0 + cnt) of the staged tile.
  auto advance = [&](float* h, int t0, int cnt) {
#pragma unroll 1
    for (int t = t0; t < t0 + cnt; t += 4) {
#pragma unroll
      for (int s = 0; s < 4; s++) {
        const float4 dd = sm.d[cc][t + s];
        float bb[kS];
        unpack4(ld4(&sm.B[t + s][q * kS]), bb);
#pragma unroll
        for (int j = 0; j < kS; j++) h[j] = fmaf(ANVIL_EXP2_FTZ(dd.x * A2[j]), h[j], bb[j] * dd.y);
      }
    }
  };
  // Both reductions of one round of kHalf steps starting at tile step tr (tile k of the sequence at tt).
  auto reduce_round = [&](int64_t tt, int tr) {
    {  // dC / dB: 32 channels of step rs, state rn -> one atomic
      const float* src = &sm.red[rs][rw * kCB * kNP + rn];
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < kCB; c++) s += src[c * kNP];
      const int64_t t = tt + tr + rs;
      if (rn < p.N && t < L) atomicAdd((rw ? p.dB : p.dC) + bc + int64_t(rn) * L + t, s);
    }
    {  // per step of channel cc: step q of the round
      const int s = q;
      float gB = 0.f, dtw = 0.f, ys = 0.f;
#pragma unroll
      for (int l = 0; l < kQ; l++) {
        gB += sm.pp[cc][0 * kQ * kHalf + l * kHalf + s];
        dtw += sm.pp[cc][1 * kQ * kHalf + l * kHalf + s];
        ys += sm.pp[cc][2 * kQ * kHalf + l * kHalf + s];
      }
      const float4 dd = sm.d[cc][tr + s];
      const float2 ee = sm.e[cc][tr + s];
      const int64_t t = tt + tr + s;
      const float ddt = fmaf(dd.w, gB, dtw * kLn2) * ee.x;  // (u gB + A-part) * d dt / d delta
      if (valid && t < L) {
        const int64_t o = row * L + t;
        static_cast<T*>(p.du)[o] = from_f32<T>(fmaf(dd.x, gB, dskip * dd.z));
        static_cast<T*>(p.ddelta)[o] = from_f32<T>(ddt);
        if (Z) static_cast<T*>(p.dz)[o] = from_f32<T>(ee.y * fmaf(dskip, dd.w, ys));
        dD_acc = fmaf(dd.z, dd.w, dD_acc);
        ddb_acc += ddt;
      }
    }
  };

  float4* ck = p.ck + int64_t(blk) * kTiles * kThreads + tid;
  for (int c = p.chunks - 1; c >= 0; c--) {
    const int64_t left = (L - int64_t(c) * kChunk + kTT - 1) / kTT;  // tiles from the chunk start to L
    const int nt = left < kTiles ? int(left) : kTiles;
    const int kt0 = c * kTiles;  // the chunk's first tile in the sequence
    float h0[kS];
#pragma unroll
    for (int j = 0; j < kS; j++) {
      const int n = q * kS + j;
      h0[j] = c > 0 && valid && n < p.N ? p.states[(row * p.chunks + c - 1) * p.N + n] : 0.f;
    }
    // Phase 1: the chunk's forward, checkpoints at tile starts 1 .. nt-1.
    if (nt > 1) {
      float h[kS] = {h0[0], h0[1], h0[2], h0[3]};
      prefetch(kt0, false);
      for (int k = 0; k + 1 < nt; k++) {
        __syncthreads();  // the staged tile is free
        stage(kt0 + k, false);
        __syncthreads();
        if (k + 2 < nt) prefetch(kt0 + k + 1, false);
        advance(h, 0, kTT);
        ck[(k + 1) * kThreads] = make_float4(h[0], h[1], h[2], h[3]);
      }
    }
    // Phase 2: tiles from last to first.
    prefetch(kt0 + nt - 1, true);
    for (int k = nt - 1; k >= 0; k--) {
      const int64_t tt = int64_t(kt0 + k) * kTT;
      __syncthreads();
      stage(kt0 + k, true);
      __syncthreads();
      if (k > 0) prefetch(kt0 + k - 1, true);
      float ht[kS];
      if (k > 0) unpack4(ck[k * kThreads], ht);
      else for (int j = 0; j < kS; j++) ht[j] = h0[j];
      {
        float h[kS] = {ht[0], ht[1], ht[2], ht[3]};
        for (int i = 0; i + 1 < kSubs; i++) {
          advance(h, i * kSub, kSub);
          sm.sub[i][tid] = make_float4(h[0], h[1], h[2], h[3]);
        }
      }
#pragma unroll 1
      for (int i = kSubs - 1; i >= 0; i--) {
        const int tb = i * kSub;
        float hs[kS];
        if (i > 0) unpack4(sm.sub[i - 1][tid], hs);
        else for (int j = 0; j < kS; j++) hs[j] = ht[j];
        // Recompute the sub-tile: a and h of its 8 steps, and the state part of y.
        float a[kSub][kS], h[kSub][kS], ys[kSub];
#pragma unroll
        for (int s = 0; s < kSub; s++) {
          const float4 dd = sm.d[cc][tb + s];
          float bb[kS], cv[kS];
          unpack4(ld4(&sm.B[tb + s][q * kS]), bb);
          unpack4(ld4(&sm.C[tb + s][q * kS]), cv);
          ys[s] = 0.f;
#pragma unroll
          for (int j = 0; j < kS; j++) {
            a[s][j] = ANVIL_EXP2_FTZ(dd.x * A2[j]);
            h[s][j] = fmaf(a[s][j], s > 0 ? h[s - 1][j] : hs[j], bb[j] * dd.y);
            ys[s] = fmaf(cv[j], h[s][j], ys[s]);
          }
        }
        // The adjoint, from the sub-tile's last step down, in rounds of kHalf steps.
#pragma unroll
        for (int r = kSub / kHalf - 1; r >= 0; r--) {
          float gB[kHalf], dtw[kHalf];
#pragma unroll
          for (int s = r * kHalf + kHalf - 1; s >= r * kHalf; s--) {
            const float4 dd = sm.d[cc][tb + s];  // dt, dt*u, dy, u
            float bb[kS], cv[kS], vC[kS], vB[kS];
            unpack4(ld4(&sm.B[tb + s][q * kS]), bb);
            unpack4(ld4(&sm.C[tb + s][q * kS]), cv);
            const int sr = s - r * kHalf;
            gB[sr] = dtw[sr] = 0.f;
#pragma unroll
            for (int j = 0; j < kS; j++) {
              const float G = fmaf(cv[j], dd.z, qc[j]);  // dL/dh_t, all paths
              vC[j] = dd.z * h[s][j];
              vB[j] = G * dd.y;
              gB[sr] = fmaf(G, bb[j], gB[sr]);
              qc[j] = a[s][j] * G;
              const float w = qc[j] * (s > 0 ? h[s - 1][j] : hs[j]);  // dL/d(dt A) at step t
              dtw[sr] = fmaf(A2[j], w, dtw[sr]);
              dA[j] = fmaf(w, dd.x, dA[j]);
            }
            st4(&sm.red[sr][cc * kNP + q * kS], vC[0], vC[1], vC[2], vC[3]);
            st4(&sm.red[sr][kCB * kNP + cc * kNP + q * kS], vB[0], vB[1], vB[2], vB[3]);
          }
          float* pp = &sm.pp[cc][q * kHalf];
          st4(pp, gB[0], gB[1], gB[2], gB[3]);
          st4(pp + kQ * kHalf, dtw[0], dtw[1], dtw[2], dtw[3]);
          st4(pp + 2 * kQ * kHalf, ys[r * kHalf], ys[r * kHalf + 1], ys[r * kHalf + 2], ys[r * kHalf + 3]);
          __syncthreads();  // the round's partial sums are in red and pp
          reduce_round(tt, tb + r * kHalf);
          __syncthreads();  // red and pp are free again
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kS; j++)
    if (valid && q * kS + j < p.N) atomicAdd(p.dA + int64_t(d) * p.N + q * kS + j, dA[j]);
  if (valid && p.dD) atomicAdd(p.dD + d, dD_acc);
  if (valid && p.ddelta_bias) atomicAdd(p.ddelta_bias + d, ddb_acc);
}

template <class T>
__global__ void f32_to_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = from_f32<T>(src[i]);
}

template <class T, bool VEC>
void launch_bwd_seq(const BwdSeqParams& p, unsigned grid) {
  auto kernel = scan_bwd_seq_kernel<T, VEC>;
  static const bool attr = [&] {  // > 48 KB of dynamic shared memory must be asked for (NVIDIA); 57 KB < 64 KB LDS
    ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                        gpuFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(BwdSmem))));
    return true;
  }();
  (void)attr;
  kernel<<<grid, kThreads, sizeof(BwdSmem), gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}


}  // namespace

int selective_scan_bwd_variant() {
  static const int v = [] {
    const char* e = std::getenv("ANVIL_SCAN_BWD_VARIANT");
    // 3: fwd+bwd 2.19 ms against 2.25 (2), 2.79 (0) and 3.22 (1) on the H200, 2026-11-30.
    return e && *e ? std::atoi(e) : 3;
  }();
  return v;
}

bool selective_scan_bwd_seq_gpu(int variant, const Tensor& dout, const Tensor& u, const Tensor& delta,
                                const Tensor& A, const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip,
                                const Tensor& z, const Tensor& delta_bias, bool delta_softplus, const Tensor& states,
                                Tensor& du, Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD,
                                Tensor& dz, Tensor& ddelta_bias) {
  if (variant != 1 || A.size(1) > kNP) return false;
  BwdSeqParams p;
  p.u = u.data_ptr();
  p.delta = delta.data_ptr();
  p.Bm = Bm.data_ptr();
  p.Cm = Cm.data_ptr();
  p.z = z.defined() ? z.data_ptr() : nullptr;
  p.dout = dout.data_ptr();
  p.du = du.data_ptr();
  p.ddelta = ddelta.data_ptr();
  p.dz = dz.defined() ? dz.data_ptr() : nullptr;
  p.A = A.data<float>();
  p.D_skip = D_skip.defined() ? D_skip.data<float>() : nullptr;
  p.delta_bias = delta_bias.defined() ? delta_bias.data<float>() : nullptr;
  p.states = states.data<float>();
  p.dA = dA.data<float>();
  p.dD = dD.defined() ? dD.data<float>() : nullptr;
  p.ddelta_bias = ddelta_bias.defined() ? ddelta_bias.data<float>() : nullptr;
  p.L = u.size(2);
  p.D = int(u.size(1));
  p.N = int(A.size(1));
  p.G = int(Bm.size(1));
  p.per_group = p.D / p.G;
  p.blocks_per_group = gpu::ceil_div(p.per_group, kCB);
  p.chunks = int(selective_scan_chunks(p.L));
  p.softplus = delta_softplus;
  const int64_t grid = u.size(0) * p.G * p.blocks_per_group;
  // dz is written only when z is given (the front-end requires it then).
  if (!z.defined()) p.dz = nullptr;
  const bool f32 = dB.dtype() == DType::f32;
  Tensor dB32 = f32 ? dB : Tensor::empty(dB.shape(), DType::f32, dB.device());
  Tensor dC32 = f32 ? dC : Tensor::empty(dC.shape(), DType::f32, dC.device());
  dB32.zero_();
  dC32.zero_();
  p.dB = dB32.data<float>();
  p.dC = dC32.data<float>();
  Tensor ck = Tensor::empty({grid * kTiles * kThreads * 4}, DType::f32, u.device());
  p.ck = reinterpret_cast<float4*>(ck.data<float>());
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    const bool vec = p.L % gpu::Pack<T>::N == 0 && scan_seq::all_aligned16({&u, &delta, &Bm, &Cm, &z, &dout});
    if (vec) launch_bwd_seq<T, true>(p, unsigned(grid));
    else launch_bwd_seq<T, false>(p, unsigned(grid));
    if (!f32) {
      const int64_t n = dB.numel();
      f32_to_kernel<T><<<gpu::ceil_div(n, 256), 256, 0, gpu::stream()>>>(p.dB, dB.data<T>(), n);
      ANVIL_LAUNCH_CHECK();
      f32_to_kernel<T><<<gpu::ceil_div(n, 256), 256, 0, gpu::stream()>>>(p.dC, dC.data<T>(), n);
      ANVIL_LAUNCH_CHECK();
    }
  });
  return true;
}

}  // namespace anvil
