// CPU attention: f32 math, OpenMP over independent rows or heads.
// Forward: one query row at a time with the online softmax (running max m, running sum l, rescaled
// accumulator), so nothing of size T x T exists; the kv head's K and V are widened to f32 once per (b, head).
// Backward: one (b, kv head) per thread, so the thread owns dK and dV of that head (no reductions across
// threads) and the dQ rows of the query heads that read it.
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/attention/attention.h"

namespace anvil {
namespace {

// Rows [0, T) of head `head` of a (B, T, H, HD) array, widened to f32: dst (T, HD).
template <class T>
void gather_head(const T* src, float* dst, int64_t b, int64_t head, int64_t Tn, int64_t H, int64_t HD) {
  for (int64_t t = 0; t < Tn; t++)
    for (int64_t d = 0; d < HD; d++) dst[t * HD + d] = to_f32(src[((b * Tn + t) * H + head) * HD + d]);
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// Online softmax of one query against rows [0, n) of K and V (f32, (n, HD)): out (HD) = softmax(scale q.K) V.
// Returns the log-sum-exp. acc is scratch of HD floats.
float online_row(const float* q, const float* K, const float* V, int64_t n, int64_t HD, float scale, float* acc) {
  float m = -INFINITY, l = 0.f;
  for (int64_t d = 0; d < HD; d++) acc[d] = 0.f;
  for (int64_t j = 0; j < n; j++) {
    const float s = scale * dot(q, K + j * HD, HD);
    if (s > m) {  // new maximum: rescale what was summed under the old one
      const float alpha = std::exp(m - s);
      l *= alpha;
      for (int64_t d = 0; d < HD; d++) acc[d] *= alpha;
      m = s;
    }
    const float p = std::exp(s - m);
    l += p;
    for (int64_t d = 0; d < HD; d++) acc[d] += p * V[j * HD + d];
  }
  for (int64_t d = 0; d < HD; d++) acc[d] /= l;
  return m + std::log(l);
}

template <class T>
void fwd(const T* q, const T* k, const T* v, T* out, float* lse, int64_t B, int64_t Tn, int64_t NH, int64_t NKV,
         int64_t HD, float scale) {
  const int64_t group = NH / NKV;
#pragma omp parallel
  {
    std::vector<float> K(Tn * HD), V(Tn * HD), qr(HD), acc(HD);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < NH; h++) {
        gather_head(k, K.data(), b, h / group, Tn, NKV, HD);
        gather_head(v, V.data(), b, h / group, Tn, NKV, HD);
        for (int64_t i = 0; i < Tn; i++) {
          const int64_t row = ((b * Tn + i) * NH + h) * HD;
          for (int64_t d = 0; d < HD; d++) qr[d] = to_f32(q[row + d]);
          lse[(b * NH + h) * Tn + i] = online_row(qr.data(), K.data(), V.data(), i + 1, HD, scale, acc.data());
          for (int64_t d = 0; d < HD; d++) out[row + d] = from_f32<T>(acc[d]);
        }
      }
  }
}

// P is recomputed from the saved lse: p_ij = exp(scale q_i.k_j - lse_i); D_i = dO_i . O_i (the stored output,
// as on the GPU); dS = P (dP - D).
template <class T>
void bwd(const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse, T* dq, T* dk, T* dv,
         int64_t B, int64_t Tn, int64_t NH, int64_t NKV, int64_t HD, float scale) {
  const int64_t group = NH / NKV;
#pragma omp parallel
  {
    std::vector<float> K(Tn * HD), V(Tn * HD), dK(Tn * HD), dV(Tn * HD);
    std::vector<float> qr(HD), gr(HD), dqr(HD), p(Tn);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++)
      for (int64_t kvh = 0; kvh < NKV; kvh++) {
        gather_head(k, K.data(), b, kvh, Tn, NKV, HD);
        gather_head(v, V.data(), b, kvh, Tn, NKV, HD);
        std::fill(dK.begin(), dK.end(), 0.f);
        std::fill(dV.begin(), dV.end(), 0.f);
        for (int64_t h = kvh * group; h < (kvh + 1) * group; h++)
          for (int64_t i = 0; i < Tn; i++) {
            const int64_t row = ((b * Tn + i) * NH + h) * HD;
            float D = 0.f;
            for (int64_t d = 0; d < HD; d++) {
              qr[d] = to_f32(q[row + d]);
              gr[d] = to_f32(dout[row + d]);
              D += gr[d] * to_f32(out[row + d]);
              dqr[d] = 0.f;
            }
            const float L = lse[(b * NH + h) * Tn + i];
            for (int64_t j = 0; j <= i; j++) {
              const float pj = std::exp(scale * dot(qr.data(), K.data() + j * HD, HD) - L);
              const float ds = scale * pj * (dot(gr.data(), V.data() + j * HD, HD) - D);
              for (int64_t d = 0; d < HD; d++) {
                dqr[d] += ds * K[j * HD + d];
                dK[j * HD + d] += ds * qr[d];
                dV[j * HD + d] += pj * gr[d];
              }
            }
            for (int64_t d = 0; d < HD; d++) dq[row + d] = from_f32<T>(dqr[d]);
          }
        for (int64_t t = 0; t < Tn; t++)
          for (int64_t d = 0; d < HD; d++) {
            const int64_t o = ((b * Tn + t) * NKV + kvh) * HD + d;
            dk[o] = from_f32<T>(dK[t * HD + d]);
            dv[o] = from_f32<T>(dV[t * HD + d]);
          }
      }
  }
}

// One query per (b, head) against the first lens[b] rows of the cache (lens already checked).
template <class T>
void decode(const T* q, const T* kc, const T* vc, const int32_t* lens, T* out, int64_t B, int64_t Tmax, int64_t NH,
            int64_t NKV, int64_t HD, float scale) {
  const int64_t group = NH / NKV;
#pragma omp parallel
  {
    std::vector<float> K(Tmax * HD), V(Tmax * HD), qr(HD), acc(HD);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < NH; h++) {
        const int64_t n = lens[b];
        for (int64_t t = 0; t < n; t++)
          for (int64_t d = 0; d < HD; d++) {
            const int64_t o = ((b * Tmax + t) * NKV + h / group) * HD + d;
            K[t * HD + d] = to_f32(kc[o]);
            V[t * HD + d] = to_f32(vc[o]);
          }
        for (int64_t d = 0; d < HD; d++) qr[d] = to_f32(q[(b * NH + h) * HD + d]);
        online_row(qr.data(), K.data(), V.data(), n, HD, scale, acc.data());
        for (int64_t d = 0; d < HD; d++) out[(b * NH + h) * HD + d] = from_f32<T>(acc[d]);
      }
  }
}

}  // namespace

void attention_fwd_cpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse) {
  const int64_t B = q.size(0), Tn = q.size(1), NH = q.size(2), NKV = k.size(2), HD = q.size(3);
  ANVIL_DISPATCH_FLOAT(q.dtype(), T,
                       fwd<T>(q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), lse.data<float>(), B, Tn, NH,
                              NKV, HD, scale));
}

void attention_bwd_cpu(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t B = q.size(0), Tn = q.size(1), NH = q.size(2), NKV = k.size(2), HD = q.size(3);
  ANVIL_DISPATCH_FLOAT(q.dtype(), T,
                       bwd<T>(dout.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(),
                              lse.data<float>(), dq.data<T>(), dk.data<T>(), dv.data<T>(), B, Tn, NH, NKV, HD, scale));
}

void attention_decode_cpu(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& lens,
                          float scale, Tensor& out) {
  const int64_t B = q.size(0), NH = q.size(1), HD = q.size(2), Tmax = k_cache.size(1), NKV = k_cache.size(2);
  ANVIL_DISPATCH_FLOAT(q.dtype(), T,
                       decode<T>(q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), lens.data<int32_t>(),
                                 out.data<T>(), B, Tmax, NH, NKV, HD, scale));
}

}  // namespace anvil
