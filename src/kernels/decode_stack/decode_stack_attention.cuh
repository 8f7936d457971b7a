// Phase 2 of decode_stack (decode_stack.cu): rope, the KV append and split attention for one (kv-head, split)
// block, with the last block of each group combining the splits.
#pragma once
#include "kernels/decode_stack/decode_stack_gpu.cuh"

#ifdef ANVIL_HAS_BULK_COPY
namespace anvil::decode_stack_gpu {

// Shared floats the attention phase needs (inside the x region): cos/sin, q, new k and v, the warps' (m, l) and
// accumulators, the ticket flag.
inline int attn_floats(int HD, int G) {
  return HD + G * HD + 2 * HD + 2 * kWarps * G + kWarps * G * HD + 1;
}
__device__ __forceinline__ float ref_of(float m) { return m == -INFINITY ? 0.f : m; }

// A lane's DPL dims of one cache row, kept as the bf16 bits until the math: 2 dims a register, so a warp step
// holds twice the rows in flight that floats would.
template <int DPL>
struct RowBits {
  uint32_t w[(DPL + 1) / 2];
};
template <int DPL>
__device__ __forceinline__ RowBits<DPL> load_bits(const bf16* p) {
  RowBits<DPL> r;
  if constexpr (DPL == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    r.w[0] = v.x, r.w[1] = v.y;
  } else if constexpr (DPL == 2) {
    r.w[0] = *reinterpret_cast<const uint32_t*>(p);
  } else {
    r.w[0] = uint32_t(*reinterpret_cast<const uint16_t*>(p));
  }
  return r;
}
// The bits of DPL floats that hold bf16 values (the new row, from shared memory), or of zeros.
template <int DPL>
__device__ __forceinline__ RowBits<DPL> bits_of(const float* f, bool valid) {
  RowBits<DPL> r;
#pragma unroll
  for (int i = 0; i < (DPL + 1) / 2; i++) {
    const uint32_t lo = valid ? __float_as_uint(f[2 * i]) >> 16 : 0u;
    const uint32_t hi = valid && 2 * i + 1 < DPL ? __float_as_uint(f[2 * i + 1]) & 0xffff0000u : 0u;
    r.w[i] = lo | hi;
  }
  return r;
}
template <int DPL>
__device__ __forceinline__ float dim_of(const RowBits<DPL>& r, int d) {
  return d % 2 ? hi_f32(r.w[d / 2]) : lo_f32(r.w[d / 2]);
}

// The attention's blocks: kv-head g, its q-heads [hs GS, (hs + 1) GS) of G (GS = G / qs), split s of nsplit
// over cache rows [j0, j1); row pos is the new one. Blocks from NKV * qs * nsplit on have none (g < 0).
// One split (contexts up to attn_rows) gives each q-head a block of its own (qs = G). With a block per kv-head, 8
// blocks did all of it at the 8B shape, a warp step of 24 rows taking ~2 µs under the weight stream: at 120 tokens of
// context the latest block's phase took 10.1 µs a layer against 2.9 at 4 tokens, and the other blocks waited for
// its output. A block per q-head: 7.9 µs (7.4 with 8 rows a step, below), FP8 loop 2.343 -> 2.297 ms/token over
// 128 tokens (H200, docs/decode_kernels.md, twenty-seventh round). It needs no combine (a block's heads are whole);
// the rows are read once per q-head, mostly from L2. Longer contexts split the rows instead (qs = 1), as before.
struct AttnSplit {
  int pos, nsplit, qs, g, hs, s, j0, j1;
};
template <int G>
__device__ __forceinline__ AttnSplit attn_split(const Params& p) {
  const int pos = p.start[0], len = pos + 1;
  const int nsplit0 = max(1, min(p.max_splits, (len + p.attn_rows - 1) / p.attn_rows));
  const int rps = (len + nsplit0 - 1) / nsplit0, nsplit = (len + rps - 1) / rps;
  const int qs = p.head_split && nsplit == 1 && p.NKV * G <= int(gridDim.x) ? G : 1;
  const int item = blockIdx.x, per_kv = qs * nsplit;
  if (item >= p.NKV * per_kv) return {pos, nsplit, qs, -1, 0, 0, 0, 0};
  const int g = item / per_kv, hs = item % per_kv / nsplit, s = item % nsplit, j0 = s * rps;
  return {pos, nsplit, qs, g, hs, s, j0, min(len, j0 + rps)};
}
// Blocks that write the attention output of a layer (hand-off 1): one per (kv-head, q-head subset).
template <int G>
__device__ __forceinline__ unsigned attn_writers(const Params& p) {
  return unsigned(p.NKV * attn_split<G>(p).qs);
}

// One block's share (attn_split), GS of the kv-head's G q-heads. q|k|v arrive as tagged words with qtag; the output
// goes to p.att with the next hand-off's tag.
template <int HD, int GS, int G>
__device__ void attention_heads(const Params& p, const Layer& ly, float* sm, uint32_t qtag, const AttnSplit& sp) {
  static_assert(HD <= kConsumers, "a thread loads at most one of v's words");
  constexpr int DPL = HD / kW, HALF = HD / 2;
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW;
  const int pos = sp.pos, nsplit = sp.nsplit, g = sp.g, s = sp.s, j0 = sp.j0, j1 = sp.j1;
  const int h0 = g * G + sp.hs * GS;  // the block's first q-head
  float* cs = sm;                     // [HD]: cos, then sin
  float* qs = cs + HD;                // [G][HD] rotated q * scale * log2(e)
  float* kn = qs + G * HD;            // [HD] the new k (rotated) and v, as bf16 values
  float* vn = kn + HD;
  float* mm = vn + HD;                // [kWarps][G] (m, l)
  float* ml = mm + kWarps * G;
  float* macc = ml + kWarps * G;      // [kWarps][G][HD]
  int* s_last = reinterpret_cast<int*>(macc + kWarps * G * HD);

  for (int i = threadIdx.x; i < HALF; i += kConsumers) {
    float sn, cn;
    sincosf(float(pos) * p.inv_freq[i], &sn, &cn);
    cs[i] = cn, cs[HALF + i] = sn;
  }
  consumer_sync();
  // Rotations: GS q-heads and the k head, pairs (i, i + HD/2); then v. Rounded to bf16 as rope_append stores them.
  // A thread's first pair and its word of v (threads below HD, which all have a first pair: (GS + 1) HALF >= HD)
  // are polled together.
  const bool last_split = s == nsplit - 1 && sp.hs == 0;  // it holds row pos: it appends k and v to the cache
  const uint32_t* vsrc = p.qkv + p.QD + p.KVD + g * HD;
  bf16 v_mine;
  for (int t = threadIdx.x; t < (GS + 1) * HALF; t += kConsumers) {
    const int hh = t / HALF, i = t % HALF;
    const uint32_t* src = hh < GS ? p.qkv + (h0 + hh) * HD : p.qkv + p.QD + g * HD;
    const uint32_t* const words[3] = {src + i, src + i + HALF, vsrc + threadIdx.x};
    const bool need[3] = {true, true, t == int(threadIdx.x) && int(threadIdx.x) < HD};
    bf16 w[3];
    tagged_words<3>(words, need, qtag, w);
    if (need[2]) v_mine = w[2];
    const float x1 = to_f32(w[0]), x2 = to_f32(w[1]);
    const bf16 y1 = from_f32<bf16>(x1 * cs[i] - x2 * cs[HALF + i]);
    const bf16 y2 = from_f32<bf16>(x2 * cs[i] + x1 * cs[HALF + i]);
    if (hh < GS) {
      qs[hh * HD + i] = to_f32(y1) * p.scale_log2, qs[hh * HD + i + HALF] = to_f32(y2) * p.scale_log2;
    } else {
      kn[i] = to_f32(y1), kn[i + HALF] = to_f32(y2);
      if (last_split) {
        bf16* kc = ly.kc + (int64_t(pos) * p.NKV + g) * HD;
        kc[i] = y1, kc[i + HALF] = y2;
      }
    }
  }
  if (threadIdx.x < HD) {
    const int i = threadIdx.x;
    vn[i] = to_f32(v_mine);
    if (last_split) ly.vc[(int64_t(pos) * p.NKV + g) * HD + i] = v_mine;
  }
  consumer_sync();

  float qf[GS][DPL], acc[GS][DPL], m[GS], l[GS];
#pragma unroll
  for (int gi = 0; gi < GS; gi++) {
#pragma unroll
    for (int d = 0; d < DPL; d++) qf[gi][d] = qs[gi * HD + lane * DPL + d], acc[gi][d] = 0.f;
    m[gi] = -INFINITY, l[gi] = 0.f;
  }
  // Rows per warp per step, all loaded before any math: under the weight stream a step waits ~2 µs on its loads
  // wherever they hit (the rows prefetched into L2 a layer's start ahead measured no faster), so fewer steps is what
  // shortens the phase. Within the 128 registers 13 warps per SM allow: 2 rows at GS = 4 (HD 128: 4 spilled more and
  // the step ran 1.7% slower), 8 at one head (against 4 as floats: FP8 loop 2.301 -> 2.272 ms/token).
  constexpr int R = GS >= 4 ? 2 : GS == 1 ? 8 : 4;
  const int64_t stride = int64_t(p.NKV) * HD;
  const bf16* kb = ly.kc + int64_t(g) * HD + lane * DPL;
  const bf16* vb = ly.vc + int64_t(g) * HD + lane * DPL;
  for (int base = j0 + warp; base < j1; base += kWarps * R) {
    RowBits<DPL> kf[R], vf[R];
    bool valid[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
      const int j = base + r * kWarps;
      valid[r] = j < j1;
      if (valid[r] && j != pos) {
        kf[r] = load_bits<DPL>(kb + j * stride);
        vf[r] = load_bits<DPL>(vb + j * stride);
      } else {  // the new row comes from shared memory; rows past the split are zeros
        kf[r] = bits_of<DPL>(kn + lane * DPL, valid[r]);
        vf[r] = bits_of<DPL>(vn + lane * DPL, valid[r]);
      }
    }
    float sc[R][GS];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int gi = 0; gi < GS; gi++) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) d = fmaf(qf[gi][e], dim_of(kf[r], e), d);
        d = gpu::warp_sum(d);
        sc[r][gi] = valid[r] ? d : -INFINITY;
      }
#pragma unroll
    for (int gi = 0; gi < GS; gi++) {
      float mx = m[gi];
#pragma unroll
      for (int r = 0; r < R; r++) mx = fmaxf(mx, sc[r][gi]);
      const float ref = ref_of(mx), alpha = ANVIL_EXP2_FTZ(m[gi] - ref);
      m[gi] = mx, l[gi] *= alpha;
#pragma unroll
      for (int d = 0; d < DPL; d++) acc[gi][d] *= alpha;
#pragma unroll
      for (int r = 0; r < R; r++) {
        const float e = ANVIL_EXP2_FTZ(sc[r][gi] - ref);
        l[gi] += e;
#pragma unroll
        for (int d = 0; d < DPL; d++) acc[gi][d] = fmaf(e, dim_of(vf[r], d), acc[gi][d]);
      }
    }
  }
  // Warps merge through shared memory in warp order.
#pragma unroll
  for (int gi = 0; gi < GS; gi++) {
#pragma unroll
    for (int d = 0; d < DPL; d++) macc[(warp * GS + gi) * HD + lane * DPL + d] = acc[gi][d];
    if (lane == 0) mm[warp * GS + gi] = m[gi], ml[warp * GS + gi] = l[gi];
  }
  consumer_sync();
  for (int t = threadIdx.x; t < GS * HD; t += kConsumers) {
    const int gi = t / HD, d = t % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; w++) mx = fmaxf(mx, mm[w * GS + gi]);
    const float ref = ref_of(mx);
    float a = 0.f, ls = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
      const float f = ANVIL_EXP2_FTZ(mm[w * GS + gi] - ref);
      ls += f * ml[w * GS + gi];
      a += f * macc[(w * GS + gi) * HD + d];
    }
    if (nsplit == 1) {
      out_tagged(p.att, next_tag(qtag)).put((h0 + gi) * HD + d, a / ls);
    } else {
      float* pp = p.part + ((int64_t(g) * p.max_splits + s) * G + sp.hs * GS + gi) * (HD + 2);
      if (d == 0) pp[0] = mx, pp[1] = ls;
      pp[2 + d] = a;
    }
  }
  if (nsplit == 1) {
    handoff_arrive(p, 1);
    return;
  }
  // The last block of the group to finish combines the splits, in split order (deterministic). Splits come with
  // qs = 1 (attn_split), so the kv-head's ticket counts them alone.
  consumer_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned t = atomicAdd(&p.counters[1 + g], 1u);
    *s_last = t == unsigned(nsplit - 1);
    if (*s_last) atomicExch(&p.counters[1 + g], 0u);
  }
  consumer_sync();
  if (!*s_last) return;
  __threadfence();
  const float* pg = p.part + int64_t(g) * p.max_splits * G * (HD + 2);
  for (int t = threadIdx.x; t < GS * HD; t += kConsumers) {
    const int gi = sp.hs * GS + t / HD, d = t % HD;
    float mx = -INFINITY;
    for (int k = 0; k < nsplit; k++) mx = fmaxf(mx, anvil_load_l2(pg + (k * G + gi) * (HD + 2)));
    float a = 0.f, ls = 0.f;
    for (int k = 0; k < nsplit; k++) {
      const float* pp = pg + (k * G + gi) * (HD + 2);
      const float f = ANVIL_EXP2_FTZ(anvil_load_l2(pp) - mx);
      ls = fmaf(f, anvil_load_l2(pp + 1), ls);
      a = fmaf(f, anvil_load_l2(pp + 2 + d), a);
    }
    out_tagged(p.att, next_tag(qtag)).put((g * G + gi) * HD + d, a / ls);
  }
  handoff_arrive(p, 1);
}

template <int HD, int G>
__device__ void attention(const Params& p, const Layer& ly, float* sm, uint32_t qtag) {
  const AttnSplit a = attn_split<G>(p);
  if (a.g < 0) return;
  if constexpr (G > 1) {
    if (a.qs == G) return attention_heads<HD, 1, G>(p, ly, sm, qtag, a);
  }
  attention_heads<HD, G, G>(p, ly, sm, qtag, a);
}

}  // namespace anvil::decode_stack_gpu

#endif  // ANVIL_HAS_BULK_COPY
