// Device helpers shared by the sequential selective-scan kernels (selective_scan_fwd_seq.cu,
// selective_scan_bwd_async.cu): per-(channel, step) nonlinearities, guarded 16-byte pack loads and the block
// index's decoding.
#pragma once
#include <initializer_list>

#include "backends/gpu/common.cuh"
#include "backends/gpu/fast_math.cuh"
#include "core/tensor.h"

namespace anvil::scan_seq {

// Softplus, SiLU and sigmoid, once per (channel, step): the shared definitions (fast_math.cuh).
using gpu::sigmoid_t;
using gpu::silu_t;
using gpu::softplus_t;

// One 16-byte pack of a row at t0 (elements past L read as zero). VEC: L is a multiple of the pack and every
// row starts on 16 bytes, so a pack is wholly inside or wholly past L.
template <class T, bool VEC>
__device__ __forceinline__ gpu::Pack<T> load_pack_at(const T* __restrict__ r, int64_t t0, int64_t L) {
  constexpr int P = gpu::Pack<T>::N;
  gpu::Pack<T> pk;
  if constexpr (VEC) {
    if (t0 < L) return gpu::load_pack(r + t0);
#pragma unroll
    for (int i = 0; i < P; i++) pk.v[i] = from_f32<T>(0.f);
  } else {
#pragma unroll
    for (int i = 0; i < P; i++) pk.v[i] = t0 + i < L ? r[t0 + i] : from_f32<T>(0.f);
  }
  return pk;
}
// Channel block `blk` of a sequential scan grid (blocks of cb channels of one (batch, group); the blocks of a
// (batch, group) are consecutive): its batch b, group g, first channel ch0 in the group, and where its (b, g)
// rows of Bm / Cm (B, G, N, L) start.
struct ScanBlock {
  int b, g, ch0;
  int64_t bc;
};
__device__ __forceinline__ ScanBlock scan_block(int blk, int blocks_per_group, int G, int N, int64_t L, int cb) {
  const int jb = blk % blocks_per_group, bg = blk / blocks_per_group;
  ScanBlock s;
  s.g = bg % G, s.b = bg / G, s.ch0 = jb * cb;
  s.bc = (int64_t(s.b) * G + s.g) * N * L;
  return s;
}

template <class T>
__device__ __forceinline__ gpu::Pack<T> zero_pack() {
  gpu::Pack<T> pk;
#pragma unroll
  for (int i = 0; i < gpu::Pack<T>::N; i++) pk.v[i] = from_f32<T>(0.f);
  return pk;
}

// Host: 16-byte loads need every row to start on 16 bytes (with L a multiple of the pack, the base pointers
// decide); undefined (optional) tensors do not count.
inline bool all_aligned16(std::initializer_list<const Tensor*> ts) {
  bool ok = true;
  for (const Tensor* t : ts) ok = ok && (!t->defined() || gpu::aligned16(t->data_ptr()));
  return ok;
}

}  // namespace anvil::scan_seq
