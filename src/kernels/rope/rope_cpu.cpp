// CPU rope: tokens in parallel; each token's cos/sin table (HD/2 entries) is computed once for all heads.
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/rope/rope.h"

namespace anvil {

template <class T>
static void rotate(const T* x, const int32_t* pos, const float* inv_freq, T* y, int64_t N, int64_t NH, int64_t HD,
                   float sign) {
  const int64_t half = HD / 2;
#pragma omp parallel
  {
    std::vector<float> cs(static_cast<size_t>(HD));  // cos[0, half), sign * sin[half, HD)
#pragma omp for
    for (int64_t n = 0; n < N; n++) {
      const float p = float(pos[n]);
      for (int64_t i = 0; i < half; i++) {
        const float a = p * inv_freq[i];
        cs[i] = std::cos(a);
        cs[half + i] = sign * std::sin(a);
      }
      for (int64_t h = 0; h < NH; h++) {
        const int64_t o = (n * NH + h) * HD;
        for (int64_t i = 0; i < half; i++) {
          const float x1 = to_f32(x[o + i]), x2 = to_f32(x[o + half + i]), c = cs[i], s = cs[half + i];
          y[o + i] = from_f32<T>(x1 * c - x2 * s);  // x may be y: both read before either is written
          y[o + half + i] = from_f32<T>(x2 * c + x1 * s);
        }
      }
    }
  }
}

void rope_fwd_cpu(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y, bool inverse) {
  const int64_t N = x.size(0), NH = x.size(1), HD = x.size(2);
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       rotate<T>(x.data<T>(), pos.data<int32_t>(), inv_freq.data<float>(), y.data<T>(), N, NH, HD,
                                 inverse ? -1.f : 1.f));
}

}  // namespace anvil
