// Device helpers shared by the sequential selective-scan kernels (selective_scan_fwd_seq.cu,
// selective_scan_bwd_async.cu): per-(channel, step) nonlinearities and guarded 16-byte pack loads.
#pragma once
#include <initializer_list>

#include "backends/gpu/common.cuh"
#include "core/tensor.h"

namespace anvil::scan_seq {

// Softplus and SiLU, once per (channel, step). 16-bit I/O takes the MUFU approximations (their ~1e-7 relative
// error is far below the dtype's 4e-3) through the flush-to-zero spellings: __expf / __logf under -ftz=false wrap
// each MUFU op in a range test and two predicated multiplies (3 more issue slots; the conv kernels issued on
// 75-86% of cycles). f32 keeps the accurate library functions.
constexpr float kSeqLog2e = 1.4426950408889634f;
constexpr float kSeqLn2 = 0.6931471805599453f;
template <class T>
__device__ __forceinline__ float softplus_t(float v) {
  if constexpr (sizeof(T) == 2) return v > 20.f ? v : kSeqLn2 * ANVIL_LOG2_FTZ(1.f + ANVIL_EXP2_FTZ(v * kSeqLog2e));
  else return v > 20.f ? v : log1pf(expf(v));
}
template <class T>
__device__ __forceinline__ float silu_t(float v) {
  if constexpr (sizeof(T) == 2) return __fdividef(v, 1.f + ANVIL_EXP2_FTZ(v * -kSeqLog2e));
  else return v / (1.f + expf(-v));
}
template <class T>
__device__ __forceinline__ float sigmoid_t(float v) {
  if constexpr (sizeof(T) == 2) return __fdividef(1.f, 1.f + ANVIL_EXP2_FTZ(v * -kSeqLog2e));
  else return 1.f / (1.f + expf(-v));
}

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
