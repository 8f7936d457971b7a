// GPU sum of squares over a list of f32 tensors (the global gradient norm), in two launches: block b squares and
// sums a 32768-element chunk of the tensor the descriptor table maps it to, into partial[b]; one block then
// adds the partials in a fixed order into out. No atomics, and the grid depends only on the tensor sizes, so
// the sum is the same on every run and every GPU model.
//
// Chunk: 32768 f32 = 128 KB per block against the table search at its start (~1 us, see adamw_multi.cu).
// Mamba-130m's 129M gradients make ~4100 partials (16 KB), which the final block reads in 4 loads per thread.
#include "backends/gpu/common.cuh"  // first: the vendor runtime before core/ headers

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/tensor_table.cuh"

namespace anvil {
namespace {

constexpr int kThreads = 256;
constexpr int kFinalThreads = 1024;
constexpr int64_t kChunk = 32768;  // a multiple of 4: every chunk of an aligned tensor starts aligned

__global__ void __launch_bounds__(kThreads) partial_kernel(const gpu::SpanEntry* __restrict__ table, int count,
                                                            float* __restrict__ partial) {
  __shared__ float scratch[gpu::kWarpSize];
  const int64_t b = blockIdx.x;
  const gpu::SpanEntry e = table[gpu::find_entry(table, count, b)];
  const float* x = static_cast<const float*>(e.p);
  const int64_t begin = (b - e.first_block) * kChunk, end = begin + kChunk < e.n ? begin + kChunk : e.n;
  float acc = 0.f;
  int64_t done = begin;
  if (e.vec) {
    const int64_t n4 = (end - begin) / 4;
    for (int64_t k = threadIdx.x; k < n4; k += kThreads) {
      const auto q = gpu::load_pack(x + begin + 4 * k);
#pragma unroll
      for (int j = 0; j < 4; j++) acc += q.v[j] * q.v[j];
    }
    done = begin + 4 * n4;
  }
  for (int64_t i = done + threadIdx.x; i < end; i += kThreads) acc += x[i] * x[i];
  acc = gpu::block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[b] = acc;
}

__global__ void __launch_bounds__(kFinalThreads) final_kernel(const float* __restrict__ partial, int64_t G,
                                                               float* __restrict__ out) {
  __shared__ float scratch[gpu::kWarpSize];
  float acc = 0.f;
  for (int64_t g = threadIdx.x; g < G; g += kFinalThreads) acc += partial[g];
  acc = gpu::block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] += acc;
}

}  // namespace

void grad_sum_squares_multi_gpu(const std::vector<Tensor>& xs, Tensor& out) {
  int64_t blocks = 0;
  const std::vector<gpu::SpanEntry> table = gpu::span_table(xs, false, kChunk, "grad_sum_squares_multi", blocks);
  if (table.empty()) return;  // every tensor empty: out += 0
  const auto* dt = static_cast<const gpu::SpanEntry*>(gpu::cached_table(gpu::table_bytes(table)));
  Tensor partial = Tensor::empty({blocks}, DType::f32, out.device());
  partial_kernel<<<int(blocks), kThreads, 0, gpu::stream()>>>(dt, int(table.size()), partial.data<float>());
  ANVIL_LAUNCH_CHECK();
  final_kernel<<<1, kFinalThreads, 0, gpu::stream()>>>(partial.data<float>(), blocks, out.data<float>());
  ANVIL_LAUNCH_CHECK();
}

}  // namespace anvil
