// GPU attention decode (flash-decoding in one launch): one query per (b, q-head) against the first lens[b]
// rows of a KV cache (B, Tmax, NKV, HD).
//
// Why this shape (H200, Llama-3.1-8B: NH 32, NKV 8, HD 128, bf16, batch 1). At 2048 tokens a layer's K and V
// are 2 x 2048 x 8 x 128 x 2 B = 8.4 MB, 2.0 µs at the 4.15 TB/s copy rate; the previous kernels took ~39 µs
// per layer there (+1.24 ms per 32-layer step), and two launches per layer (split + combine, 2.8 µs each) at
// short contexts. Its block served one q-head, so every K/V row was fetched by the NH / NKV = 4 blocks of its
// group; lanes did 2-byte loads; one warp per row made a serial chain (load, 5-shuffle sum, exp) per row.
//
// Design:
// - Grid (nsplit, B * NKV * HC). A block serves one (b, kv-head) and up to GT of its G = NH / NKV q-heads
//   (GT in {1, 2, 4}, a template parameter: the smallest >= G, else 4 with HC = ceil(G / 4) chunks), so each
//   K/V byte leaves HBM once (G > 4: once per chunk, the chunks of a split run in the same wave and the second
//   read is meant to hit L2). It walks rows [split * rps, (split + 1) * rps), rps from the shapes only.
// - A lane owns 8 consecutive head dims (one 16-byte pack of bf16/f16, two of f32) and L = HD / 8 rounded up
//   to a power of two lanes hold one row (2..16; HD 80 and 96 leave 6 and 4 of 16 idle). A warp of W lanes
//   has W / L row slots, each taking R rows per step, and every K and V load of a step (2 R packs per lane) is
//   issued before any arithmetic: at GT 4, R = 2, 64 B per lane, 16 KB per block, 32 KB per SM at two blocks
//   (the ~20 KB bandwidth-latency product per SM: 4.15 TB/s x ~0.6 µs / 132). A score is 8 FMAs per head
//   and a log2(L)-step butterfly over the row's L lanes (4 shuffles at HD 128, where one warp per row took 5),
//   and the online softmax rescales once per step of R rows, not per row.
// - Slots merge by shuffles, warps through shared memory, in a fixed order. A block that is alone (its b's
//   rows fit one split) writes out; otherwise it writes (m, l, acc[HD]) per head to a scratch, and the last
//   block of its group to finish (a device-wide fence, then an atomic ticket) combines the partials:
//   out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s, M = max_s m_s. The sum runs in a fixed order
//   (thread k of an output takes s = k, k + KS, ... in order, and the KS partial sums are added k = 0, 1, ...),
//   so the bits do not depend on which block came last: repeated calls give identical outputs.
// - One launch per call at every context length: the combine is the last block's epilogue, not a kernel.
//
// lens live on the device and are never read by the host (a copy would stall decoding and break graph
// capture): the launch configuration depends on the shapes only. Each block reads lens[b], clamps it to
// [0, Tmax], and splits past the last row exit at once: the splits that hold rows, nonempty = max(1,
// ceil(len / rps)), are the only ones that take a ticket, and the last of them combines (an empty row
// gives zeros: split 0 always runs).
//
// Ticket counters: g_decode_tickets, a __device__ array of one counter per grid row (B * NKV * HC <= 65535,
// the grid's y limit). It is zero when the module loads (static storage, zero-initialised like any .bss) and
// every call leaves it zero: the last block of a group resets its counter after taking the final ticket, when
// no other block of the call will touch it. So no allocation, memset or host step exists that a graph capture
// could miss or replay wrongly, and a captured graph replays with zeroed counters. (A tensor grown on demand
// would have to keep every old buffer alive: captured graphs hold its address. Each device that loads the
// module gets its own array.) The price: calls that share
// a device must not overlap in time (the counters of two concurrent calls would mix). anvil runs one stream
// per thread and the decode step on one of them; the kernel is launched the ordinary way, so it starts after
// the previous attention call has finished. A block killed mid-call (a trap) would leave a counter set, but a
// trap also ends the context.
#include <algorithm>
#include <cstdlib>

#include "kernels/attention/attention_gpu.cuh"  // first: it brings the vendor runtime that core/ headers need
#include "core/dispatch.h"
#include "core/env.h"
#include "kernels/attention/attention.h"

namespace anvil {
namespace {

using namespace attn;

constexpr int kThreads = 256;     // 8 warps of 32 or 4 wavefronts of 64
constexpr int kWarps = kThreads / gpu::kWarpSize;
constexpr int kDims = 8;          // head dims per lane
constexpr int kMaxGroups = 65535;  // grid y limit: one ticket counter each
constexpr int kMaxSplits = 256;   // the combine stages (m, l) of every split in shared memory

__device__ unsigned int g_decode_tickets[kMaxGroups + 1] = {};

constexpr int pow2_ceil(int x) { return x <= 1 ? 1 : 2 * pow2_ceil((x + 1) / 2); }

template <class T, int HD, int GT>
struct DecodeTraits {
  static constexpr int W = gpu::kWarpSize;
  static constexpr int PN = gpu::Pack<T>::N;          // elements per 16-byte pack: 8 (bf16, f16) or 4 (f32)
  static constexpr int PL = kDims / PN;               // packs per lane per row: 1 or 2
  static constexpr int CH = HD / kDims;               // lanes of a row that hold dims
  static constexpr int L = pow2_ceil(CH);             // lanes per row
  static constexpr int RS = W / L;                    // row slots per warp
  static constexpr int NS = kWarps * RS;              // row slots per block
  // Rows per slot per step, within 128 registers (two blocks per SM): a lane holds GT x 8 q values and as many
  // accumulators, R x GT scores and 2 R packs. nvcc 13, sm_90, bf16 HD 128: GT 4 with R = 4 needed ~140 and
  // spilled 120 bytes at the cap; R = 2 fits. GT 1 and 2 fit R = 4.
  static constexpr int R = GT >= 4 ? 2 : 4;
  static constexpr int ROWS = NS * R;                 // rows per block step
  static constexpr int MIN_BLOCKS = 2;                // blocks per SM the launch bounds ask for
  static constexpr int UNITS = GT * CH;               // (head, 8-dim chunk) outputs of a block
  static constexpr int KS = kThreads / UNITS;         // threads per output in the combine
  // Shared memory (floats): the warp merge, then (reused) the combine.
  static constexpr int SMEM_MERGE = kWarps * GT * (HD + 2);
  static constexpr int SMEM_COMBINE = 2 * kMaxSplits * GT + kThreads * (kDims + 1);
  static constexpr int SMEM = SMEM_MERGE > SMEM_COMBINE ? SMEM_MERGE : SMEM_COMBINE;
  static_assert(HD % kDims == 0 && L <= W && W % L == 0, "a row is a power-of-two group of lanes in a warp");
  static_assert(UNITS <= kThreads, "one thread per (head, chunk) in the merge");
  static_assert(SMEM * sizeof(float) <= 48 * 1024, "static shared memory");
};

template <class T>
struct DecodeParams {
  const T* q;
  const T* kc;
  const T* vc;
  const int32_t* lens;
  T* out;
  float* part;  // (B * NKV * HC, nsplit, GT, HD + 4) f32: m, l, 2 unused, acc[HD]; unused when nsplit == 1
  int NH, NKV, G, HC, Tmax, rps, nsplit;
  float scale;
};

// 8 dims of a row starting at p, as f32.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&f)[kDims]) {
  constexpr int PN = gpu::Pack<T>::N;
#pragma unroll
  for (int i = 0; i < kDims / PN; i++) {
    const gpu::Pack<T> v = gpu::load_pack(p + i * PN);
#pragma unroll
    for (int e = 0; e < PN; e++) f[i * PN + e] = to_f32(v.v[e]);
  }
}
template <class T>
__device__ __forceinline__ void store8(T* p, const float (&f)[kDims]) {
  constexpr int PN = gpu::Pack<T>::N;
#pragma unroll
  for (int i = 0; i < kDims / PN; i++) {
    gpu::Pack<T> v;
#pragma unroll
    for (int e = 0; e < PN; e++) v.v[e] = from_f32<T>(f[i * PN + e]);
    gpu::store_pack(p + i * PN, v);
  }
}
// The softmax reference point: the running max, or 0 while it is -inf (no row yet), so that
// 2^(-inf - ref) = 0 instead of 2^(-inf + inf) = NaN.
__device__ __forceinline__ float ref_of(float m) { return m == -INFINITY ? 0.f : m; }

template <class T, int HD, int GT>
__global__ void ANVIL_LAUNCH_BOUNDS(kThreads, (DecodeTraits<T, HD, GT>::MIN_BLOCKS))
    attention_decode_kernel(const DecodeParams<T> p) {
  anvil_allow_next_grid();  // the next kernel (a GEMM launched early) may start streaming its weights now
  using Tr = DecodeTraits<T, HD, GT>;
  constexpr int W = Tr::W, PN = Tr::PN, PL = Tr::PL, CH = Tr::CH, L = Tr::L, NS = Tr::NS, R = Tr::R;
  constexpr int ROWS = Tr::ROWS, UNITS = Tr::UNITS, KS = Tr::KS;
  __shared__ float smem[Tr::SMEM];
  __shared__ int s_last;

  const int split = blockIdx.x, grp = blockIdx.y;
  const int hc = grp % p.HC, bk = grp / p.HC, kvh = bk % p.NKV, b = bk / p.NKV;
  const int h0 = kvh * p.G + hc * GT, ng = min(GT, p.G - hc * GT);  // q-heads [h0, h0 + ng)
  const int len = min(max(p.lens[b], 0), p.Tmax);
  const int nonempty = max(1, (len + p.rps - 1) / p.rps);  // splits holding rows; split 0 always runs
  if (split >= nonempty) return;                            // past the end: no rows, no ticket
  const int start = split * p.rps, end = min(start + p.rps, len);

  const int lane = threadIdx.x % W, warp = threadIdx.x / W;
  const int c = lane % L, slot = warp * (W / L) + lane / L;  // dims [8c, 8c + 8) of rows slot, slot + NS, ...
  const bool active = c < CH;

  // q of the chunk's heads, pre-multiplied by scale * log2(e): the softmax runs in base 2.
  float qf[GT][kDims], acc[GT][kDims], m[GT], l[GT];
#pragma unroll
  for (int g = 0; g < GT; g++) {
    if (active && g < ng) {
      load8(p.q + (int64_t(b) * p.NH + h0 + g) * HD + c * kDims, qf[g]);
    } else {
#pragma unroll
      for (int i = 0; i < kDims; i++) qf[g][i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < kDims; i++) {
      qf[g][i] *= p.scale * kLog2e;
      acc[g][i] = 0.f;
    }
    m[g] = -INFINITY;
    l[g] = 0.f;
  }

  const int64_t row_stride = int64_t(p.NKV) * HD;
  const T* kbase = p.kc + (int64_t(b) * p.Tmax * p.NKV + kvh) * HD + c * kDims;
  const T* vbase = p.vc + (int64_t(b) * p.Tmax * p.NKV + kvh) * HD + c * kDims;
  for (int base = start; base < end; base += ROWS) {  // block-uniform: the shuffles below see every lane
    // Every load of the step first: 2 R packs (R K rows, R V rows) per lane in flight.
    gpu::Pack<T> kp[R][PL], vp[R][PL];
    bool valid[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
      const int j = base + r * NS + slot;
      valid[r] = j < end;
#pragma unroll
      for (int i = 0; i < PL; i++) {
        if (valid[r] && active) {
          kp[r][i] = gpu::load_pack(kbase + j * row_stride + i * PN);
          vp[r][i] = gpu::load_pack(vbase + j * row_stride + i * PN);
        } else {
#pragma unroll
          for (int e = 0; e < PN; e++) kp[r][i].v[e] = vp[r][i].v[e] = from_f32<T>(0.f);
        }
      }
    }
    // Scores: 8 FMAs per head per lane, then a butterfly over the row's L lanes (every lane gets the sum).
    float s[R][GT];
#pragma unroll
    for (int r = 0; r < R; r++) {
      float kf[kDims];
#pragma unroll
      for (int i = 0; i < PL; i++)
#pragma unroll
        for (int e = 0; e < PN; e++) kf[i * PN + e] = to_f32(kp[r][i].v[e]);
#pragma unroll
      for (int g = 0; g < GT; g++) {
        float d = 0.f;
#pragma unroll
        for (int i = 0; i < kDims; i++) d = fmaf(qf[g][i], kf[i], d);
        d = gpu::warp_sum<L>(d);
        s[r][g] = valid[r] ? d : -INFINITY;
      }
    }
    // Online softmax, one rescale per step of R rows.
#pragma unroll
    for (int g = 0; g < GT; g++) {
      float mx = m[g];
#pragma unroll
      for (int r = 0; r < R; r++) mx = fmaxf(mx, s[r][g]);
      const float ref = ref_of(mx), alpha = ANVIL_EXP2_FTZ(m[g] - ref);
      m[g] = mx;
      l[g] *= alpha;
#pragma unroll
      for (int i = 0; i < kDims; i++) acc[g][i] *= alpha;
#pragma unroll
      for (int r = 0; r < R; r++) s[r][g] = ANVIL_EXP2_FTZ(s[r][g] - ref);  // masked rows: 2^-inf = 0
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
      float vf[kDims];
#pragma unroll
      for (int i = 0; i < PL; i++)
#pragma unroll
        for (int e = 0; e < PN; e++) vf[i * PN + e] = to_f32(vp[r][i].v[e]);
#pragma unroll
      for (int g = 0; g < GT; g++) {
        l[g] += s[r][g];
#pragma unroll
        for (int i = 0; i < kDims; i++) acc[g][i] = fmaf(s[r][g], vf[i], acc[g][i]);
      }
    }
  }

  // Merge the row slots of a warp (butterfly over lanes L, 2L, ... apart), then the warps in shared memory.
#pragma unroll
  for (int o = L; o < W; o <<= 1) {
#pragma unroll
    for (int g = 0; g < GT; g++) {
      const float mo = ANVIL_SHFL_XOR(m[g], o, W), lo = ANVIL_SHFL_XOR(l[g], o, W);
      const float mx = fmaxf(m[g], mo), ref = ref_of(mx);
      const float fs = ANVIL_EXP2_FTZ(m[g] - ref), fo = ANVIL_EXP2_FTZ(mo - ref);
      m[g] = mx;
      l[g] = l[g] * fs + lo * fo;
#pragma unroll
      for (int i = 0; i < kDims; i++) acc[g][i] = acc[g][i] * fs + ANVIL_SHFL_XOR(acc[g][i], o, W) * fo;
    }
  }
  float* s_acc = smem;                        // [kWarps][GT][HD]
  float* s_ml = smem + kWarps * GT * HD;      // [kWarps][GT][2]
  if (lane < L) {
#pragma unroll
    for (int g = 0; g < GT; g++) {
      if (active)
#pragma unroll
        for (int i = 0; i < kDims; i++) s_acc[(warp * GT + g) * HD + c * kDims + i] = acc[g][i];
      if (c == 0) {
        s_ml[(warp * GT + g) * 2] = m[g];
        s_ml[(warp * GT + g) * 2 + 1] = l[g];
      }
    }
  }
  __syncthreads();

  // One thread per (head g, chunk cc): the block's (m, l, acc[8]) from its warps, in warp order.
  const int u = threadIdx.x % UNITS, g_u = u / CH, cc = u % CH;
  const int k_u = threadIdx.x / UNITS;  // the combine's share of the splits
  T* out_u = p.out + (int64_t(b) * p.NH + h0 + g_u) * HD + cc * kDims;
  if (threadIdx.x < UNITS) {
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; w++) mx = fmaxf(mx, s_ml[(w * GT + g_u) * 2]);
    const float ref = ref_of(mx);
    float a[kDims] = {}, lsum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
      const float f = ANVIL_EXP2_FTZ(s_ml[(w * GT + g_u) * 2] - ref);  // a warp without rows adds nothing
      lsum += f * s_ml[(w * GT + g_u) * 2 + 1];
#pragma unroll
      for (int i = 0; i < kDims; i++) a[i] += f * s_acc[(w * GT + g_u) * HD + cc * kDims + i];
    }
    if (nonempty == 1) {  // the whole row is this block's: done, no scratch, no ticket
      if (g_u < ng) {
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;  // an empty row gives zeros
#pragma unroll
        for (int i = 0; i < kDims; i++) a[i] *= inv;
        store8(out_u, a);
      }
    } else {
      float* pp = p.part + ((int64_t(grp) * p.nsplit + split) * GT + g_u) * (HD + 4);
      if (cc == 0) {
        pp[0] = mx;
        pp[1] = lsum;
      }
      float4* pa = reinterpret_cast<float4*>(pp + 4 + cc * kDims);
      pa[0] = make_float4(a[0], a[1], a[2], a[3]);
      pa[1] = make_float4(a[4], a[5], a[6], a[7]);
    }
  }
  if (nonempty == 1) return;

  // Ticket: the partial writes above are made visible device-wide (fence), then one thread counts this block
  // in. The block that draws nonempty - 1 is the last; it resets the counter for the next call.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned t = atomicAdd(&g_decode_tickets[grp], 1u);
    s_last = t == unsigned(nonempty - 1);
    if (s_last) atomicExch(&g_decode_tickets[grp], 0u);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // acquire: the other blocks' partials, read below through L2 (anvil_load_l2)

  // Combine. (m, l) of every split and head into shared memory, then thread (k, u) sums the splits
  // s = k, k + KS, ... for its (head, chunk); the KS partial sums are added in k order.
  const float* part = p.part + int64_t(grp) * p.nsplit * GT * (HD + 4);
  float* c_m = smem;                          // [nonempty][GT]
  float* c_l = smem + kMaxSplits * GT;        // [nonempty][GT]
  float* c_red = smem + 2 * kMaxSplits * GT;  // [KS][UNITS][9]
  for (int i = threadIdx.x; i < nonempty * GT; i += kThreads) {
    c_m[i] = anvil_load_l2(part + int64_t(i) * (HD + 4));
    c_l[i] = anvil_load_l2(part + int64_t(i) * (HD + 4) + 1);
  }
  __syncthreads();
  if (k_u < KS) {
    float mx = -INFINITY;
    for (int s = 0; s < nonempty; s++) mx = fmaxf(mx, c_m[s * GT + g_u]);
    const float ref = ref_of(mx);
    float a[kDims] = {}, lsum = 0.f;
#pragma unroll 4
    for (int s = k_u; s < nonempty; s += KS) {
      const float f = ANVIL_EXP2_FTZ(c_m[s * GT + g_u] - ref);
      const float4* pa = reinterpret_cast<const float4*>(part + (int64_t(s) * GT + g_u) * (HD + 4) + 4 + cc * kDims);
      const float4 x0 = anvil_load_l2(pa), x1 = anvil_load_l2(pa + 1);
      lsum = fmaf(f, c_l[s * GT + g_u], lsum);
      a[0] = fmaf(f, x0.x, a[0]), a[1] = fmaf(f, x0.y, a[1]), a[2] = fmaf(f, x0.z, a[2]), a[3] = fmaf(f, x0.w, a[3]);
      a[4] = fmaf(f, x1.x, a[4]), a[5] = fmaf(f, x1.y, a[5]), a[6] = fmaf(f, x1.z, a[6]), a[7] = fmaf(f, x1.w, a[7]);
    }
    float* r = c_red + (k_u * UNITS + u) * (kDims + 1);
#pragma unroll
    for (int i = 0; i < kDims; i++) r[i] = a[i];
    r[kDims] = lsum;
  }
  __syncthreads();
  if (threadIdx.x < UNITS && g_u < ng) {
    float a[kDims] = {}, lsum = 0.f;
    for (int k = 0; k < KS; k++) {
      const float* r = c_red + (k * UNITS + u) * (kDims + 1);
#pragma unroll
      for (int i = 0; i < kDims; i++) a[i] += r[i];
      lsum += r[kDims];
    }
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
#pragma unroll
    for (int i = 0; i < kDims; i++) a[i] *= inv;
    store8(out_u, a);
  }
}

// ANVIL_ATTN_DECODE_SPLITS=N forces N splits per (b, kv-head) (for tuning the heuristic; 0 or unset: automatic).
int forced_splits() {
  static const int n = env_int("attention_decode", "ANVIL_ATTN_DECODE_SPLITS", 0, kMaxSplits, 0);
  return n;
}

template <class T, int HD, int GT>
void launch(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& lens, float scale, Tensor& out) {
  using Tr = DecodeTraits<T, HD, GT>;
  const int B = int(q.size(0)), NH = int(q.size(1)), Tmax = int(kc.size(1)), NKV = int(kc.size(2));
  const int G = NH / NKV, HC = gpu::ceil_div(G, GT);
  const int64_t groups = int64_t(B) * NKV * HC;
  ANVIL_CHECK(groups <= kMaxGroups, "attention_decode", str("B * NKV * ceil(NH / NKV / ", GT, ") <= ", kMaxGroups),
              q.describe());
  // Splits: as many blocks as are resident at once at the occupancy the launch bounds ask for (MIN_BLOCKS per
  // SM), rounded down so that they are one wave (a second, partial wave would double the time: 320 blocks on
  // 264 slots at B = 8), but no split shorter than one block step of ROWS rows, and splits of a whole number of
  // steps. From shapes only: at a short lens[b] the splits past it exit at once. The 8B shape at Tmax 2048 on
  // 132 SMs: 8 groups, 264 / 8 = 33 wanted, 32 splits of 64 rows (256 blocks of 2 steps); B = 8, Tmax 4096:
  // 4 splits of 1024 rows (256 blocks).
  const int cus = gpu::device_info(gpu::current_device()).compute_units;
  const int max_split = std::min(kMaxSplits, gpu::ceil_div(Tmax, Tr::ROWS));
  int nsplit = int(std::clamp<int64_t>(int64_t(Tr::MIN_BLOCKS) * cus / groups, 1, max_split));
  int rps = gpu::ceil_div(gpu::ceil_div(Tmax, nsplit), Tr::ROWS) * Tr::ROWS;
  if (const int f = forced_splits(); f > 0) rps = gpu::ceil_div(Tmax, std::min(f, kMaxSplits));
  nsplit = gpu::ceil_div(Tmax, rps);
  for (const Tensor* t : {&q, &kc, &vc, static_cast<const Tensor*>(&out)})
    ANVIL_CHECK(gpu::aligned16(t->data_ptr()), "attention_decode", "16-byte aligned q, caches and out",
                t->describe());
  Tensor part;
  if (nsplit > 1) part = Tensor::empty({groups, nsplit, GT, HD + 4}, DType::f32, q.device());
  DecodeParams<T> p{q.data<T>(), kc.data<T>(), vc.data<T>(), lens.data<int32_t>(), out.data<T>(),
                    nsplit > 1 ? part.data<float>() : nullptr, NH, NKV, G, HC, Tmax, rps, nsplit, scale};
  attention_decode_kernel<T, HD, GT><<<dim3(unsigned(nsplit), unsigned(groups)), kThreads, 0, gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}

template <class T, int HD>
void launch_heads(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& lens, float scale, Tensor& out) {
  const int64_t G = q.size(1) / kc.size(2);  // q-heads per kv-head
  if (G == 1) launch<T, HD, 1>(q, kc, vc, lens, scale, out);
  else if (G == 2) launch<T, HD, 2>(q, kc, vc, lens, scale, out);
  else launch<T, HD, 4>(q, kc, vc, lens, scale, out);  // G > 4: chunks of 4 heads (HC blocks per group)
}

}  // namespace

void attention_decode_gpu(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                          float scale, Tensor& out) {
  const int64_t HD = q.size(2);
  ANVIL_DISPATCH_FLOAT(q.dtype(), T_, {
    switch (HD) {
      case 16: launch_heads<T_, 16>(q, k_cache, v_cache, lens, scale, out); break;  // small models (tests)
      case 32: launch_heads<T_, 32>(q, k_cache, v_cache, lens, scale, out); break;
      case 64: launch_heads<T_, 64>(q, k_cache, v_cache, lens, scale, out); break;
      case 80: launch_heads<T_, 80>(q, k_cache, v_cache, lens, scale, out); break;
      case 96: launch_heads<T_, 96>(q, k_cache, v_cache, lens, scale, out); break;
      case 128: launch_heads<T_, 128>(q, k_cache, v_cache, lens, scale, out); break;
      default: ANVIL_THROW("attention_decode", "HD in {16, 32, 64, 80, 96, 128}", HD);
    }
  });
}

}  // namespace anvil
