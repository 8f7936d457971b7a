// NVIDIA spellings. One of the two files (with hip.h) allowed to name the vendor runtime.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums only: the encoder is reached through the runtime (no -lcuda)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <string>
#include <utility>

#define ANVIL_VENDOR_NAME "cuda"
// Warp width is a compile-time constant of the target; kernels never spell the number themselves.
#define ANVIL_WARP_SIZE 32
#define ANVIL_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)

// exp2 with subnormal inputs and results flushed to zero: one MUFU.EX2. exp2f (and __expf) under the default
// -ftz=false wrap it in a compare and two predicated multiplies: 3 more issue slots per exponential, and the
// selective scan computes D*N of them per token.
__device__ __forceinline__ float anvil_exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define ANVIL_EXP2_FTZ(x) anvil_exp2_ftz(x)
// log2 with subnormals flushed: one MUFU.LG2 (__logf and log2f under -ftz=false add the same range fix-up).
__device__ __forceinline__ float anvil_log2_ftz(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define ANVIL_LOG2_FTZ(x) anvil_log2_ftz(x)

// x * y rounded on its own: nvcc never fuses __fmul_rn with an add that follows into one FMA (a plain `*`
// would be, under the default --fmad=true).
__device__ __forceinline__ float anvil_mul_rn(float x, float y) { return __fmul_rn(x, y); }

// Four e4m3fn bytes (byte i of w is weight i) to f32, exactly: every e4m3 value is an f16 value. sm_89 and later
// convert two bytes per instruction in hardware (cvt.rn.f16x2.e4m3x2), 6 instructions for 4 weights instead of
// ~20 integer ops of the bit-placement decode; NaN codes come out as NaN. Elsewhere ANVIL_HAS_E4M3_CVT is unset
// and callers keep their software codec (both directions).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define ANVIL_HAS_E4M3_CVT 1
__device__ __forceinline__ void anvil_e4m3x4_to_f32(uint32_t w, float (&f)[4]) {
  asm("{\n .reg .b16 a, b, h0, h1, h2, h3;\n .reg .b32 p, q;\n"
      " mov.b32 {a, b}, %4;\n"
      " cvt.rn.f16x2.e4m3x2 p, a;\n cvt.rn.f16x2.e4m3x2 q, b;\n"
      " mov.b32 {h0, h1}, p;\n mov.b32 {h2, h3}, q;\n"
      " cvt.f32.f16 %0, h0;\n cvt.f32.f16 %1, h1;\n cvt.f32.f16 %2, h2;\n cvt.f32.f16 %3, h3;\n}"
      : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3])
      : "r"(w));
}
// f32 to one e4m3fn byte in one instruction: round to nearest even, saturating at +-448 (infinities too), NaN to
// a NaN code; the bytes of kernels/quantize/fp8_e4m3.h's e4m3_encode (~10 integer ops), NaN's sign aside.
__device__ __forceinline__ uint8_t anvil_f32_to_e4m3fn(float v) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.f), "f"(v));  // v lands in the low byte
  return uint8_t(r & 0xffu);
}
// The same four bytes as two f16 pairs, exactly, for the f16 MMA: lo = weights 0, 1 and hi = weights 2, 3 (low
// half first). 2 instructions for 4 weights.
__device__ __forceinline__ void anvil_e4m3x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}
#endif

// Warp-level tensor-core product, m16n8k16 with f32 accumulation: d (16 x 8) += a (16 x 16) * b (16 x 8), a and b
// bf16 (BF16 = true) or f16, two values per 32-bit register, low half first. The fragments follow the PTX ISA
// ("Matrix Fragments for mma.m16n8k16 with floating point type"), with g = lane / 4, t = lane % 4:
//   a[0]: row g,   k 2t, 2t+1     a[1]: row g+8, k 2t, 2t+1     a[2]: row g, k 2t+8, 2t+9   a[3]: row g+8, k 2t+8, 2t+9
//   b[0]: k 2t, 2t+1, column g    b[1]: k 2t+8, 2t+9, column g
//   d[0], d[1]: row g, columns 2t, 2t+1                          d[2], d[3]: row g+8, columns 2t, 2t+1
// sm_80 and later (host code checks DeviceInfo::bf16_compute, which is major >= 8 on CUDA); ANVIL_HAS_MMA16816 is
// set for every pass so the host side can see that the vendor has it. hip.h does not define it: gfx90a's MFMA
// (v_mfma_f32_16x16x16bf16_1k, wave64) has a different fragment layout, and the kernels that use this keep their
// FMA path on AMD.
#define ANVIL_HAS_MMA16816 1
constexpr int kAnvilMmaLanes = 32;  // the fragment layout above is defined over 32 lanes
template <bool BF16>
__device__ __forceinline__ void anvil_mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (BF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // never launched below sm_80
#endif
}
// Two 16-bit values times a power of two c (both halves), exactly (no overflow or underflow for the callers'
// values): fma.rn with a -0 addend, so -0 stays -0. Subnormal inputs are kept (PTX: half-precision fma supports
// subnormals). Used to rebias fp8 codes placed into bf16/f16 bit fields.
template <bool BF16>
__device__ __forceinline__ uint32_t anvil_mul2_16(uint32_t x, uint32_t c) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(c), "r"(0x80008000u));
  else asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(c), "r"(0x80008000u));
#else
  r = x;
  __trap();
#endif
  return r;
}
// Two floats to an f16 pair, round to nearest (lo in the low half).
__device__ __forceinline__ uint32_t anvil_f16x2_rn(float lo, float hi) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  r = 0;
  __trap();
#endif
  return r;
}
// 16 bytes of a read-once stream (weights): through L2 without allocating in L1, so the L1 keeps the small,
// reused operand (the activations) that the same kernel reads with anvil_load16_ro. Not volatile: only for data
// no kernel writes while this one runs (it may be scheduled before anvil_wait_prior_grid()).
__device__ __forceinline__ uint4 anvil_load16_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// 16 bytes of read-only data that other warps of the SM read too (cached in L1).
__device__ __forceinline__ uint4 anvil_load16_ro(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// Early launch (see vendor::launch_early). wait: blocks until the previous grids on the stream have finished and
// their writes are visible. allow: lets the next grid launch now (each block calls it; without it the next grid
// launches as this grid's blocks exit). Both are no-ops for kernels launched the ordinary way.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void anvil_wait_prior_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void anvil_allow_next_grid() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
#else
__device__ __forceinline__ void anvil_wait_prior_grid() {}
__device__ __forceinline__ void anvil_allow_next_grid() {}
#endif

// *p += v in global memory, without a return value: nothing waits for the add to come back. (nvcc made
// every discarded atomicAdd of the ticketed selective-scan backward a returning ATOMG, where the plain kernel
// got REDG.)
__device__ __forceinline__ void anvil_red_add_f32(float* p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
// Ends the kernel with an error the host reports (a bounded wait that gave up).
__device__ __forceinline__ void anvil_trap() { __trap(); }
// One 16-byte store (STG.128 / STS.128), spelled in PTX. Written as a uint4 assignment, nvcc 13 split it into four
// 4-byte stores when a scalar tail path stored to the same address (causal_conv1d's store_run): partial-sector
// writes that left the L2 89% busy and DRAM at 25%. Generic address space, so shared memory works too.
__device__ __forceinline__ void anvil_store16(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
// A stream that a kernel reads once and writes once (the optimizer's p, g, m, v): global loads and stores marked
// evict-first (ld/st.global.cs), 16 bytes (8 for the bf16/f16 copies of 4 floats) that cannot split. Global, not
// generic: pointers read from a table are generic to nvcc, which then emits LD/ST instead of LDG/STG.
__device__ __forceinline__ uint4 anvil_load16_once(const void* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ void anvil_store16_once(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  __stcs(reinterpret_cast<uint4*>(p), make_uint4(a, b, c, d));
}
__device__ __forceinline__ void anvil_store8_once(void* p, uint32_t a, uint32_t b) {
  __stcs(reinterpret_cast<uint2*>(p), make_uint2(a, b));
}

// A load through L2 that skips the SM's L1 (ld.global.cg): for data other blocks of the same grid wrote, read
// after __threadfence() and the atomic that ordered them (attention_decode's last-block combine). L1 is not
// coherent across SMs, so a plain load could in principle return a line cached before the writes.
__device__ __forceinline__ float anvil_load_l2(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float4 anvil_load_l2(const float4* p) { return __ldcg(p); }


// Asynchronous 16-byte global -> shared copy (cp.async.cg, sm_80+; L2 only, not L1). The bytes travel without
// passing through registers, so a kernel can keep a whole tile in flight during compute without holding it in
// registers (selective_scan_bwd_async.cu: holding the next tile's packs in registers spilled 116 B per thread,
// 9.8 M local requests). full = false writes 16 zero bytes and reads nothing (src-size 0); gmem must still be a
// valid address. Completion: anvil_cp_async_commit() after a batch, anvil_cp_async_wait_all() and a barrier
// before another thread reads the bytes. Before sm_80 it is a plain copy through registers.
// 1: the copy overlaps compute (so a kernel gives it a buffer of its own); the CUDA builds target sm_80+.
#define ANVIL_ASYNC_SMEM_COPY 1
__device__ __forceinline__ void anvil_cp_async16(void* smem, const void* gmem, bool full) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(full ? 16 : 0) : "memory");
#else
  *reinterpret_cast<uint4*>(smem) = full ? *reinterpret_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void anvil_cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void anvil_cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Bulk global -> shared copies that complete on a shared-memory barrier (sm_90's copy engine: one thread starts
// a copy of up to ~1 MB and nobody waits until the bytes are used), and the mbarrier operations they need. The
// persistent decode kernel (kernels/decode_stack) streams weights through a ring of such copies so the HBM
// stream does not stop at its grid barriers. Sizes and both addresses are multiples of 16 bytes.
// ANVIL_HAS_BULK_COPY is set for every pass so host code knows the vendor has it; DeviceInfo::bulk_copy says
// whether the device does (sm_90+). Below sm_90 the device functions trap: they are never launched there.
#define ANVIL_HAS_BULK_COPY 1
__device__ __forceinline__ unsigned anvil_smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void anvil_mbar_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(anvil_smem_u32(bar)), "r"(arrivals) : "memory");
}
// Makes the inits visible to the copy engine; a block barrier after it makes them visible to the other threads.
__device__ __forceinline__ void anvil_mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also tells the barrier to expect `bytes` more bytes of copies before its phase completes.
__device__ __forceinline__ void anvil_mbar_arrive_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(anvil_smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void anvil_mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(anvil_smem_u32(bar)) : "memory");
}
// Orders this thread's earlier shared-memory writes before later copy-engine (async proxy) accesses of the same
// bytes: a slot written by threads and then refilled by a bulk copy needs it between the two.
__device__ __forceinline__ void anvil_fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Whether the phase with this parity (0, 1, 0, ...: the count of completed phases mod 2) has completed; the
// hardware may suspend the thread for a while before answering no.
__device__ __forceinline__ bool anvil_mbar_try_wait(uint64_t* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n .reg .pred P1;\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n selp.u32 %0, 1, 0, P1;\n}"
      : "=r"(done)
      : "r"(anvil_smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void anvil_bulk_copy_g2s(void* smem, const void* gmem, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   anvil_smem_u32(smem)),
               "l"(gmem), "r"(bytes), "r"(anvil_smem_u32(bar))
               : "memory");
}
// The same copy with an L2 eviction policy (from anvil_l2_evict_first()): a read-once stream marked to leave L2
// first, so the activations and KV cache read around it stay resident.
__device__ __forceinline__ uint64_t anvil_l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void anvil_bulk_copy_g2s(void* smem, const void* gmem, unsigned bytes, uint64_t* bar,
                                                    uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(anvil_smem_u32(smem)),
      "l"(gmem), "r"(bytes), "r"(anvil_smem_u32(bar)), "l"(policy)
      : "memory");
}
// A 3-D tile of a tensor map (encode_tile_map) into shared memory, completing on `bar` like the bulk copies.
// `map`: the map's generic address in global memory; c0..c2: the box's first element, innermost dimension first
// (out-of-range elements arrive as zeros). `dst` is 1024-byte aligned for the 128-byte swizzle.
__device__ __forceinline__ void anvil_tile_copy_g2s_3d(void* dst, const void* map, int c0, int c1, int c2,
                                                       uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(anvil_smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(anvil_smem_u32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void anvil_tile_copy_g2s_3d(void* dst, const void* map, int c0, int c1, int c2,
                                                       uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(anvil_smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(anvil_smem_u32(bar))
      : "memory");
}
#else
__device__ __forceinline__ void anvil_tile_copy_g2s_3d(void*, const void*, int, int, int, uint64_t*, uint64_t) {
  __trap();
}
__device__ __forceinline__ void anvil_tile_copy_g2s_3d(void*, const void*, int, int, int, uint64_t*) { __trap(); }
__device__ __forceinline__ uint64_t anvil_l2_evict_first() {
  __trap();
  return 0;
}
__device__ __forceinline__ void anvil_bulk_copy_g2s(void*, const void*, unsigned, uint64_t*, uint64_t) { __trap(); }
__device__ __forceinline__ void anvil_mbar_init(uint64_t*, unsigned) { __trap(); }
__device__ __forceinline__ void anvil_mbar_init_fence() { __trap(); }
__device__ __forceinline__ void anvil_mbar_arrive_expect(uint64_t*, unsigned) { __trap(); }
__device__ __forceinline__ void anvil_mbar_arrive(uint64_t*) { __trap(); }
__device__ __forceinline__ void anvil_fence_proxy_async_smem() { __trap(); }
__device__ __forceinline__ bool anvil_mbar_try_wait(uint64_t*, unsigned) {
  __trap();
  return false;
}
__device__ __forceinline__ void anvil_bulk_copy_g2s(void*, const void*, unsigned, uint64_t*) { __trap(); }
#endif
// A barrier among `threads` threads of the block (a multiple of the warp size) under hardware barrier `id`
// (1..15; 0 is __syncthreads): lets some warps of a block synchronise while others (a producer warp) run on.
__device__ __forceinline__ void anvil_bar_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Grid-scope relaxed 32-bit store and 4- and 16-byte loads: words another block of the running grid polls, or that it
// stores (decode_stack's tagged activations: a value and its tag in one word, so the word is its own flag and
// needs no fence). Relaxed, not weak: a weak load in a polling loop may be served from L1 or hoisted.
__device__ __forceinline__ void anvil_store_relaxed_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t anvil_load_relaxed_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint4 anvil_load16_relaxed_gpu(const uint32_t* p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// Grid-scope relaxed add: an arrival that orders nothing before it (decode_stack's hand-off counts, whose data
// carries its own tags), so it does not wait for the block's earlier stores to complete as a release would.
__device__ __forceinline__ void anvil_red_add_relaxed_gpu(unsigned* p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// The device-wide nanosecond clock (the same on every SM, unlike clock64): phase timestamps in kernel traces.
__device__ __forceinline__ unsigned long long anvil_globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// 16 bytes through L2, skipping L1 (data other blocks of the running grid wrote; see anvil_load_l2).
__device__ __forceinline__ uint4 anvil_load16_l2(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }


// Neutral spellings used by anvil's GPU sources; hip.h maps the same names onto HIP.
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuPeekAtLastError cudaPeekAtLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocHost cudaMallocHost
#define gpuFreeHost cudaFreeHost
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphDestroy cudaGraphDestroy
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define gpuMemGetInfo cudaMemGetInfo
#define gpuGraphInstantiate(exec, graph) cudaGraphInstantiate((exec), (graph), 0)

namespace anvil::gpu::vendor {
using stream_t = cudaStream_t;
using event_t = cudaEvent_t;
using graph_exec_t = cudaGraphExec_t;
using error_t = cudaError_t;
inline const char* error_string(error_t e) { return cudaGetErrorString(e); }
constexpr error_t success = cudaSuccess;
// Architecture name and capabilities: FP8 tensor-core arithmetic from sm_89 (Ada, Hopper).
template <class Info>
inline void fill_arch(const cudaDeviceProp& p, Info& info) {
  info.arch = "sm_" + std::to_string(p.major * 10 + p.minor);
  info.fp8_compute = p.major * 10 + p.minor >= 89;
  info.smem_per_block_optin = p.sharedMemPerBlockOptin;
  info.bf16_compute = p.major >= 8;
  info.early_launch = p.major >= 9;
  info.bulk_copy = p.major >= 9;
}

// Launches `kernel` so that it may start while the previous kernel on the stream is still running (Hopper's
// programmatic dependent launch; captured into graphs as a programmatic edge). The kernel must call
// anvil_wait_prior_grid() before it touches anything the previous kernels write or read.
template <class... KArgs, class... Args>
inline error_t launch_early(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, stream_t stream,
                            Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cfg.attrs = attr, cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Tensor maps (sm_90's tiled copies): a 128-byte descriptor of a strided tensor that one copy instruction reads a
// box of (anvil_tile_copy_g2s_3d). Elements of `elem_bytes` (1, 2, 4 or 8), dims[0] innermost, strides_bytes of
// dims 1..rank-1, `swizzle128`: the 128-byte shared-memory swizzle (16-byte chunk c of 128-byte line L lands at
// chunk c ^ (L % 8)). Returns an empty string, or the driver's refusal.
inline std::string encode_tile_map(void* map128, int rank, int elem_bytes, const void* base, const uint64_t* dims,
                                   const uint64_t* strides_bytes, const uint32_t* box, bool swizzle128) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) return "the driver has no cuTensorMapEncodeTiled";
  CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  switch (elem_bytes) {
    case 1: dt = CU_TENSOR_MAP_DATA_TYPE_UINT8; break;
    case 2: dt = CU_TENSOR_MAP_DATA_TYPE_UINT16; break;
    case 4: dt = CU_TENSOR_MAP_DATA_TYPE_UINT32; break;
    case 8: dt = CU_TENSOR_MAP_DATA_TYPE_UINT64; break;
    default: return "element size 1, 2, 4 or 8";
  }
  cuuint64_t d[5], st[4];
  cuuint32_t bx[5], es[5];
  for (int i = 0; i < rank; i++) d[i] = dims[i], bx[i] = box[i], es[i] = 1;
  for (int i = 0; i + 1 < rank; i++) st[i] = strides_bytes[i];
  const CUresult r = encode(static_cast<CUtensorMap*>(map128), dt, cuuint32_t(rank), const_cast<void*>(base), d, st,
                            bx, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? std::string() : "cuTensorMapEncodeTiled error " + std::to_string(int(r));
}

// Launches `kernel` with every block resident at once (a cooperative launch: the runtime refuses a grid that
// does not fit instead of letting blocks that spin on a grid barrier wait for blocks that never start).
template <class... KArgs, class... Args>
inline error_t launch_cooperative(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, stream_t stream,
                                  Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cfg.attrs = attr, cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
}  // namespace anvil::gpu::vendor

// Full-mask shuffles: the mask type is 32 bits on CUDA, 64 on HIP.
#define ANVIL_SHFL_XOR(v, lane_mask, width) __shfl_xor_sync(0xffffffffu, (v), (lane_mask), (width))
#define ANVIL_SHFL_UP(v, delta, width) __shfl_up_sync(0xffffffffu, (v), (delta), (width))
#define ANVIL_SHFL(v, src, width) __shfl_sync(0xffffffffu, (v), (src), (width))
