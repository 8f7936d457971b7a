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

template <int DPL>
__device__ __forceinline__ void load_dims(const bf16* p, float (&f)[DPL]) {
  if constexpr (DPL == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    f[0] = lo_f32(v.x), f[1] = hi_f32(v.x), f[2] = lo_f32(v.y), f[3] = hi_f32(v.y);
  } else if constexpr (DPL == 2) {
    const uint32_t v = *reinterpret_cast<const uint32_t*>(p);
    f[0] = lo_f32(v), f[1] = hi_f32(v);
  } else {
    f[0] = to_f32(*p);
  }
}

// q|k|v arrive as tagged words with qtag; the output goes to p.att with the next hand-off's tag.
template <int HD, int G>
__device__ void attention(const Params& p, const Layer& ly, float* sm, uint32_t qtag) {
  static_assert(HD <= kConsumers, "a thread loads at most one of v's words");
  constexpr int DPL = HD / kW, HALF = HD / 2;
  const int lane = threadIdx.x % kW, warp = threadIdx.x / kW;
  const int pos = p.start[0], len = pos + 1;
  const int nsplit0 = max(1, min(p.max_splits, (len + p.attn_rows - 1) / p.attn_rows));
  const int rps = (len + nsplit0 - 1) / nsplit0, nsplit = (len + rps - 1) / rps;
  const int item = blockIdx.x;
  if (item >= p.NKV * nsplit) return;
  const int g = item / nsplit, s = item % nsplit, j0 = s * rps, j1 = min(len, j0 + rps);
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
  // Rotations: G q-heads and the k head, pairs (i, i + HD/2); then v. Rounded to bf16 as rope_append stores them.
  // A thread's first pair and its word of v (threads below HD, which all have a first pair: (G + 1) HALF >= HD)
  // are polled together.
  const bool last_split = s == nsplit - 1;  // it holds row pos: it appends k and v to the cache
  const uint32_t* vsrc = p.qkv + p.QD + p.KVD + g * HD;
  bf16 v_mine;
  for (int t = threadIdx.x; t < (G + 1) * HALF; t += kConsumers) {
    const int hh = t / HALF, i = t % HALF;
    const uint32_t* src = hh < G ? p.qkv + (g * G + hh) * HD : p.qkv + p.QD + g * HD;
    const uint32_t* const words[3] = {src + i, src + i + HALF, vsrc + threadIdx.x};
    const bool need[3] = {true, true, t == int(threadIdx.x) && int(threadIdx.x) < HD};
    bf16 w[3];
    tagged_words<3>(words, need, qtag, w);
    if (need[2]) v_mine = w[2];
    const float x1 = to_f32(w[0]), x2 = to_f32(w[1]);
    const bf16 y1 = from_f32<bf16>(x1 * cs[i] - x2 * cs[HALF + i]);
    const bf16 y2 = from_f32<bf16>(x2 * cs[i] + x1 * cs[HALF + i]);
    if (hh < G) {
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

  float qf[G][DPL], acc[G][DPL], m[G], l[G];
#pragma unroll
  for (int gi = 0; gi < G; gi++) {
#pragma unroll
    for (int d = 0; d < DPL; d++) qf[gi][d] = qs[gi * HD + lane * DPL + d], acc[gi][d] = 0.f;
    m[gi] = -INFINITY, l[gi] = 0.f;
  }
  // Rows per warp per step, all loaded before any math. Within the 128 registers 13 warps per SM allow: G = 4 at
  // HD 128 with R = 4 spilled (56 B stores, 244 B loads, nvcc 13); R = 2 does not.
  constexpr int R = G >= 4 ? 2 : 4;
  const int64_t stride = int64_t(p.NKV) * HD;
  const bf16* kb = ly.kc + int64_t(g) * HD + lane * DPL;
  const bf16* vb = ly.vc + int64_t(g) * HD + lane * DPL;
  for (int base = j0 + warp; base < j1; base += kWarps * R) {
    float kf[R][DPL], vf[R][DPL];
    bool valid[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
      const int j = base + r * kWarps;
      valid[r] = j < j1;
      if (valid[r] && j != pos) {
        load_dims<DPL>(kb + j * stride, kf[r]);
        load_dims<DPL>(vb + j * stride, vf[r]);
      } else {
#pragma unroll
        for (int d = 0; d < DPL; d++) {  // the new row comes from shared memory; rows past the split are zeros
          kf[r][d] = valid[r] ? kn[lane * DPL + d] : 0.f;
          vf[r][d] = valid[r] ? vn[lane * DPL + d] : 0.f;
        }
      }
    }
    float sc[R][G];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int gi = 0; gi < G; gi++) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) d = fmaf(qf[gi][e], kf[r][e], d);
        d = gpu::warp_sum(d);
        sc[r][gi] = valid[r] ? d : -INFINITY;
      }
#pragma unroll
    for (int gi = 0; gi < G; gi++) {
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
        for (int d = 0; d < DPL; d++) acc[gi][d] = fmaf(e, vf[r][d], acc[gi][d]);
      }
    }
  }
  // Warps merge through shared memory in warp order.
#pragma unroll
  for (int gi = 0; gi < G; gi++) {
#pragma unroll
    for (int d = 0; d < DPL; d++) macc[(warp * G + gi) * HD + lane * DPL + d] = acc[gi][d];
    if (lane == 0) mm[warp * G + gi] = m[gi], ml[warp * G + gi] = l[gi];
  }
  consumer_sync();
  for (int t = threadIdx.x; t < G * HD; t += kConsumers) {
    const int gi = t / HD, d = t % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; w++) mx = fmaxf(mx, mm[w * G + gi]);
    const float ref = ref_of(mx);
    float a = 0.f, ls = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
      const float f = ANVIL_EXP2_FTZ(mm[w * G + gi] - ref);
      ls += f * ml[w * G + gi];
      a += f * macc[(w * G + gi) * HD + d];
    }
    if (nsplit == 1) {
      out_tagged(p.att, next_tag(qtag)).put((g * G + gi) * HD + d, a / ls);
    } else {
      float* pp = p.part + ((int64_t(g) * p.max_splits + s) * G + gi) * (HD + 2);
      if (d == 0) pp[0] = mx, pp[1] = ls;
      pp[2 + d] = a;
    }
  }
  if (nsplit == 1) {
    handoff_arrive(p, 1);
    return;
  }
  // The last block of the group to finish combines the splits, in split order (deterministic).
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
  for (int t = threadIdx.x; t < G * HD; t += kConsumers) {
    const int gi = t / HD, d = t % HD;
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

}  // namespace anvil::decode_stack_gpu

#endif  // ANVIL_HAS_BULK_COPY
