#include "core/rng.h"

namespace anvil {

void rng_fill_normal(float* v, uint64_t n, uint64_t seed) {
  const int64_t pairs = int64_t((n + 1) / 2);
  // Both normals of a pair come from one Philox block, as rng_normal draws them: one block per pair.
#pragma omp parallel for schedule(static, 4096)
  for (int64_t j = 0; j < pairs; j++) {
    const Philox4 r = philox(seed, uint64_t(j));
    for (uint64_t h = 0; h < 2 && 2 * uint64_t(j) + h < n; h++) {
      const float u1 = (float(r.v[2 * h] >> 8) + 1.f) * 0x1p-24f, u2 = u32_to_unit(r.v[2 * h + 1]);
      v[2 * j + h] = sqrtf(-2.f * logf(u1)) * cosf(6.2831853071795864f * u2);  // rng_normal's expression
    }
  }
}

void rng_fill_uniform(float* v, uint64_t n, uint64_t seed, double lo, double hi) {
#pragma omp parallel for schedule(static, 16384)
  for (int64_t k = 0; k < int64_t(n); k++) v[k] = float(lo + (hi - lo) * rng_uniform(seed, uint64_t(k)));
}

}  // namespace anvil
