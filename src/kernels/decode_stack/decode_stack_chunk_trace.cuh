// Chunk timelines of decode_stack's weight ring, for measuring (CMake -DANVIL_DECODE_STACK_CHUNK_TRACE=ON; off, every
// function here is empty and the kernels compile to the same code). Each block stamps clock64 at six events of the
// chunks kFirst .. kFirst + kChunks of its stream (the first layers are warm-up):
//   0 the producer starts waiting for the chunk's slot, 1 the slot is free, 2 the copy is issued;
//   3 / 4 the chunk's first consumer warp starts / ends its wait for it; 5 the last release of the slot.
// ANVIL_CHUNK_TRACE_OUT=FILE writes them after each launch (the host synchronises; eager steps only), and
// tools/chunk_trace.py reads the file. The stamps cost the producer ~0.1 µs a chunk, so compare traced builds
// with each other, not with untraced timings.
// Why: the phase stamps (ANVIL_DECODE_STACK_TRACE) say how long a GEMM phase takes, not whether the producer, the
// copies or the consumers set its pace; these do (docs/decode_kernels.md, seventeenth round).
// Included by decode_stack.cu only (its __device__ buffer must have one definition).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/gpu/common.cuh"

namespace anvil::decode_stack_gpu::chunk_trace {

constexpr int kFirst = 256, kChunks = 1024, kEvents = 6, kMaxBlocks = 256;

#ifdef ANVIL_DECODE_STACK_CHUNK_TRACE
__device__ unsigned long long g_stamps[kMaxBlocks * kChunks * kEvents];
__device__ __forceinline__ unsigned long long* at(unsigned c, int e) {
  if (c < unsigned(kFirst) || c >= unsigned(kFirst + kChunks) || blockIdx.x >= kMaxBlocks) return nullptr;
  return &g_stamps[(size_t(blockIdx.x) * kChunks + (c - kFirst)) * kEvents + e];
}
// Event e of chunk c, now.
__device__ __forceinline__ void stamp(unsigned c, int e) {
  if (auto* q = at(c, e)) *q = clock64();
}
// Event e of chunk c, now if later than what another warp stamped (the last release).
__device__ __forceinline__ void stamp_last(unsigned c, int e) {
  if (auto* q = at(c, e)) atomicMax(q, static_cast<unsigned long long>(clock64()));
}
// Before a launch: zero the stamps (a slot's last release is a max).
inline void begin() {
  void* d = nullptr;
  ANVIL_GPU_CHECK(cudaGetSymbolAddress(&d, g_stamps));
  ANVIL_GPU_CHECK(cudaMemsetAsync(d, 0, sizeof(g_stamps), gpu::stream()));
}
// After a launch of `grid` blocks: the stamps to ANVIL_CHUNK_TRACE_OUT, after a header of six int64: the magic
// "ANVILCT1", blocks, chunks, the first chunk, events, and the SM clock in kHz.
inline void end(int grid) {
  const char* f = std::getenv("ANVIL_CHUNK_TRACE_OUT");
  if (!f) return;
  const int blocks = grid < kMaxBlocks ? grid : kMaxBlocks;
  std::vector<unsigned long long> h(size_t(blocks) * kChunks * kEvents);
  ANVIL_GPU_CHECK(cudaStreamSynchronize(gpu::stream()));
  ANVIL_GPU_CHECK(cudaMemcpyFromSymbol(h.data(), g_stamps, h.size() * sizeof(h[0])));
  int khz = 0;
  ANVIL_GPU_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, gpu::current_device()));
  int64_t head[6];
  std::memcpy(&head[0], "ANVILCT1", 8);
  head[1] = blocks, head[2] = kChunks, head[3] = kFirst, head[4] = kEvents, head[5] = khz;
  FILE* fp = std::fopen(f, "wb");
  const bool ok = fp && std::fwrite(head, sizeof(head), 1, fp) == 1 &&
                  std::fwrite(h.data(), sizeof(h[0]), h.size(), fp) == h.size();
  if (!ok) std::fprintf(stderr, "anvil: could not write the chunk trace to %s\n", f);
  if (fp) std::fclose(fp);
}
#else
__device__ __forceinline__ void stamp(unsigned, int) {}
__device__ __forceinline__ void stamp_last(unsigned, int) {}
inline void begin() {}
inline void end(int) {}
#endif

}  // namespace anvil::decode_stack_gpu::chunk_trace
