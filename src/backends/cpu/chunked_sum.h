// Deterministic parallel accumulation for CPU kernels: the weight gradients of norms and the dB/dC of the scan are
// sums over rows (or channels) of per-row contributions. Per-thread partial sums merged in a critical section
// gave a different rounding for every thread count and, with 3+ threads, every run. Here the rows are split into
// a fixed number of chunks that does not depend on the thread count; a chunk's rows are summed in order into its
// own buffer, and the buffers are added in chunk order: the same bits for any OMP_NUM_THREADS.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace anvil::cpu {

// 32 chunks: enough for 32 threads; the buffers cost 32 * width floats (C = 16384: 2 MB).
constexpr int64_t kSumChunks = 32;

// Calls body(begin, end, acc) for the chunks of [0, n), in parallel; acc points at `width` zeroed floats that
// belong to the chunk. Returns the chunk buffers summed in chunk order (`width` floats). max_chunks bounds the
// memory when `width` is large (it must not depend on the thread count).
template <class Body>
std::vector<float> chunked_sum(int64_t n, int64_t width, Body body, int64_t max_chunks = kSumChunks) {
  const int64_t chunks = std::max<int64_t>(1, std::min(n, max_chunks));
  std::vector<float> part(size_t(chunks * width), 0.f);
#pragma omp parallel for schedule(static, 1)
  for (int64_t c = 0; c < chunks; c++) body(n * c / chunks, n * (c + 1) / chunks, part.data() + c * width);
  std::vector<float> sum(size_t(width), 0.f);
  for (int64_t c = 0; c < chunks; c++)
    for (int64_t i = 0; i < width; i++) sum[size_t(i)] += part[size_t(c * width + i)];
  return sum;
}

}  // namespace anvil::cpu
