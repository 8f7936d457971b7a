// Counter-based RNG (Philox-4x32, 10 rounds): the n-th number of a seed is a pure function of (seed, n), so
// the CPU and every GPU produce the same stream, in any order and any thread layout.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace anvil {

struct Philox4 { uint32_t v[4]; };

ANVIL_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
}

// Four 32-bit words for counter `ctr` under key `seed`.
ANVIL_HD Philox4 philox(uint64_t seed, uint64_t ctr) {
  uint32_t c0 = uint32_t(ctr), c1 = uint32_t(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
ANVIL_HD float u32_to_unit(uint32_t x) { return float(x >> 8) * 0x1p-24f; }

// The i-th uniform number of stream `seed`.
ANVIL_HD float rng_uniform(uint64_t seed, uint64_t i) { return u32_to_unit(philox(seed, i >> 2).v[i & 3]); }

// The i-th standard normal of stream `seed` (Box-Muller on a pair drawn from one Philox block).
ANVIL_HD float rng_normal(uint64_t seed, uint64_t i) {
  Philox4 r = philox(seed, i >> 1);
  uint32_t a = r.v[(i & 1) * 2], b = r.v[(i & 1) * 2 + 1];
  float u1 = (float(a >> 8) + 1.f) * 0x1p-24f;  // (0, 1]: log is finite
  float u2 = u32_to_unit(b);
  return sqrtf(-2.f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

// Host fills, OpenMP-parallel (the values do not depend on the thread layout): v[k] = rng_normal(seed, k) and
// v[k] = lo + (hi - lo) * rng_uniform(seed, k), for k < n, to the bit. Initialising Mamba-130m's 129 M parameters
// one rng_normal at a time, serially, took ~5 s of a 2-core machine's start-up.
void rng_fill_normal(float* v, uint64_t n, uint64_t seed);
void rng_fill_uniform(float* v, uint64_t n, uint64_t seed, double lo, double hi);

}  // namespace anvil
