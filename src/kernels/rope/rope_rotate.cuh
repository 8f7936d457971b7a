// Device pieces shared by the rope and rope_append kernels: a token's cos/sin table in shared memory and the
// rotation of P pairs with it (the rotate_half convention of rope.h).
#pragma once
#include "backends/gpu/common.cuh"
#include "kernels/elementwise/fp8_io.h"

namespace anvil::rope_gpu {

// cs[0, half) = cos(pos * inv_freq[i]), cs[half, HD) = sign * sin(...), written by the block's `threads` threads.
// The caller fences with __syncthreads() before (the previous table may still be read) and after.
__device__ __forceinline__ void fill_table(float* cs, float pos, const float* __restrict__ inv_freq, int half,
                                           float sign, int threads) {
  for (int i = threadIdx.x; i < half; i += threads) {
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);
    cs[i] = c;
    cs[half + i] = sign * s;
  }
}

// Rotates the pairs (x[i + j], x[i + half + j]), j < P, into y (x may be y: both halves are read first).
template <class T, int P>
__device__ __forceinline__ void rotate(const T* x, T* y, const float* cs, int i, int half) {
  const auto a = load_vec<T, P>(x + i), b = load_vec<T, P>(x + i + half);
  Vec<T, P> ya, yb;
#pragma unroll
  for (int j = 0; j < P; j++) {
    const float x1 = to_f32(a.v[j]), x2 = to_f32(b.v[j]), c = cs[i + j], s = cs[half + i + j];
    ya.v[j] = from_f32<T>(x1 * c - x2 * s);
    yb.v[j] = from_f32<T>(x2 * c + x1 * s);
  }
  store_vec(y + i, ya);
  store_vec(y + i + half, yb);
}

}  // namespace anvil::rope_gpu
