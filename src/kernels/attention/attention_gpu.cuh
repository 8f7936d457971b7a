// Pieces shared by the GPU attention kernels (attention_fwd.cu, attention_bwd.cu, attention_decode.cu):
// the flat parameter structs, tile loads into shared memory, and a 4-wide dot product.
//
// Shared-memory tiles are f32, row-major with HD + 4 floats per row: the +4 keeps every row 16-byte aligned
// for float4 reads and shifts consecutive rows by 4 banks (HD = 64, 96, 128) or 20 banks (HD = 80), so the
// 8 lanes of a quarter-warp that read 8 different rows with one LDS.128 touch 32 distinct banks.
#pragma once
#include "backends/gpu/common.cuh"

namespace anvil::attn {

constexpr float kLog2e = 1.4426950408889634f;  // softmax runs in base 2: exp(x) = exp2(x * log2(e))
constexpr float kLn2 = 0.6931471805599453f;

// The host -> kernel contract. Arrays are contiguous: q, out, dout, dq (B, T, NH, HD); k, v, dk, dv
// (B, T, NKV, HD); lse, D (B, NH, T). E is the element type; HD is a template parameter of the kernels.
template <class E>
struct FwdParams {
  const E* q;
  const E* k;
  const E* v;
  E* out;
  float* lse;
  int B, T, NH, NKV;
  float scale;
};
template <class E>
struct BwdParams : FwdParams<E> {
  const E* dout;
  const float* D;   // (B, NH, T) rowsum(dout * out)
  float* dq_acc;    // (B, T, NH, HD) f32, zeroed; the kernel adds into it with atomics
  E* dk;
  E* dv;
};

// Rows [r0, r0 + R) of head `head` of a (B, T, H, HD) array into s (R, HD + 4) f32, times `mul`; rows past T
// are zeros (so masked columns never multiply garbage). Consecutive threads read consecutive elements.
template <class T, int HD, int R, int NT>
__device__ __forceinline__ void load_tile(float* s, const T* x, int b, int r0, int head, int Tn, int H, float mul) {
  constexpr int LD = HD + 4;
  for (int e = threadIdx.x; e < R * HD; e += NT) {
    const int r = e / HD, d = e % HD, t = r0 + r;
    float val = 0.f;
    if (t < Tn) val = to_f32(x[((int64_t(b) * Tn + t) * H + head) * HD + d]) * mul;
    s[r * LD + d] = val;
  }
}

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float dot4(float acc, float4 a, float4 b) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}
__device__ __forceinline__ float comp(float4 a, int i) { return i == 0 ? a.x : i == 1 ? a.y : i == 2 ? a.z : a.w; }

// Kernels using more than the default 48 KB of dynamic shared memory must say so on NVIDIA; on AMD the limit
// is the 64 KB LDS and the call is accepted as a no-op. Every configuration here stays under 64 KB.
template <class K>
inline void allow_smem(K kernel, size_t bytes) {
  ANVIL_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                                      int(bytes)));
}

}  // namespace anvil::attn
