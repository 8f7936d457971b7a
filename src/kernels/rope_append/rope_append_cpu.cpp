// CPU rope_append: tokens in parallel; each token's cos/sin table is computed once for its q and k heads.
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/rope_append/rope_append.h"

namespace anvil {

template <class T>
static void rotate_heads(const T* x, const float* cs, T* y, int64_t heads, int64_t HD) {
  const int64_t half = HD / 2;
  for (int64_t h = 0; h < heads; h++)
    for (int64_t i = 0; i < half; i++) {
      const int64_t o = h * HD + i;
      const float x1 = to_f32(x[o]), x2 = to_f32(x[o + half]), c = cs[i], s = cs[half + i];
      y[o] = from_f32<T>(x1 * c - x2 * s);
      y[o + half] = from_f32<T>(x2 * c + x1 * s);
    }
}

template <class T>
static void run(const T* qkv, const int32_t* start, const float* inv_freq, T* q, T* kc, T* vc, int64_t B, int64_t T_,
                int64_t NH, int64_t NKV, int64_t HD, int64_t Tmax) {
  const int64_t QD = NH * HD, KVD = NKV * HD, row = QD + 2 * KVD, half = HD / 2;
#pragma omp parallel
  {
    std::vector<float> cs(static_cast<size_t>(HD));
#pragma omp for
    for (int64_t n = 0; n < B * T_; n++) {
      const int64_t b = n / T_, pos = int64_t(start[b]) + n % T_;
      for (int64_t i = 0; i < half; i++) {
        const float a = float(pos) * inv_freq[i];
        cs[size_t(i)] = std::cos(a);
        cs[size_t(half + i)] = std::sin(a);
      }
      const T* x = qkv + n * row;
      rotate_heads(x, cs.data(), q + n * QD, NH, HD);
      if (pos < 0 || pos >= Tmax) continue;
      const int64_t o = (b * Tmax + pos) * KVD;
      rotate_heads(x + QD, cs.data(), kc + o, NKV, HD);
      for (int64_t i = 0; i < KVD; i++) vc[o + i] = x[QD + KVD + i];
    }
  }
}

void rope_append_cpu(const Tensor& qkv, const Tensor& start, const Tensor& inv_freq, Tensor& q, Tensor& k_cache,
                     Tensor& v_cache) {
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2), HD = q.size(3);
  const int64_t Tmax = k_cache.size(1), NKV = k_cache.size(2);
  ANVIL_DISPATCH_FLOAT(qkv.dtype(), E,
                       run<E>(qkv.data<E>(), start.data<int32_t>(), inv_freq.data<float>(), q.data<E>(),
                              k_cache.data<E>(), v_cache.data<E>(), B, T, NH, NKV, HD, Tmax));
}

}  // namespace anvil
