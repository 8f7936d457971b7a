// GPU embedding. Forward: a row copy with 16-byte packs; backward: f32 atomics into dtable (ids repeat, so
// rows must add up; a sort-by-id reduction would be deterministic but costs a sort per step, and the
// embedding gradient is ~1% of a step's bytes).
// A bad id is clamped into [0, V) and its first (position, value) recorded in a per-device error word.
#include <mutex>

#include "backends/gpu/common.cuh"
#include "core/dispatch.h"
#include "kernels/embedding/embedding.h"

namespace anvil {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDevices = 64;
// The error word holds (position, value) as position << kValueBits | uint32(value): atomicMin keeps the
// smallest position. All ones (the memset 0xff) means no error.
constexpr uint64_t kNoError = ~uint64_t(0);
constexpr int kValueBits = 8 * sizeof(int32_t);

// The per-device error word, allocated once (8 bytes, kept for the life of the process).
uint64_t* error_word() {
  static std::mutex mu;
  static uint64_t* word[kMaxDevices] = {};
  const int d = gpu::current_device();
  ANVIL_CHECK(d >= 0 && d < kMaxDevices, "embedding", str("a device index below ", kMaxDevices), d);
  std::lock_guard<std::mutex> lock(mu);
  if (!word[d]) {
    word[d] = static_cast<uint64_t*>(gpu::alloc(sizeof(uint64_t)));
    gpu::memset_async(word[d], 0xff, sizeof(uint64_t));
    gpu::synchronize();  // once per device: later kernels may run on another stream
  }
  return word[d];
}

// Returns id clamped into [0, V); records (n, id) when it was outside. Smallest position wins.
__device__ __forceinline__ int64_t checked_row(int32_t id, int64_t n, int V, unsigned long long* err) {
  if (id >= 0 && id < V) return id;
  atomicMin(err, (static_cast<unsigned long long>(n) << kValueBits) | static_cast<uint32_t>(id));
  return id < 0 ? 0 : V - 1;
}

// grid.x covers a row's columns (in packs of P when VEC), grid.y strides over rows.
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) embedding_fwd_kernel(const int32_t* __restrict__ ids,
                                                                   const T* __restrict__ table, T* __restrict__ out,
                                                                   int64_t N, int V, int C,
                                                                   unsigned long long* err) {
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int c = (blockIdx.x * kThreads + threadIdx.x) * P;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    // Every block of the row sees the bad id; only the first column block records it.
    const int32_t id = ids[n];
    const int64_t row = blockIdx.x == 0 ? checked_row(id, n, V, err) : (id < 0 ? 0 : (id >= V ? V - 1 : id));
    if (c >= C) continue;
    if constexpr (VEC) gpu::store_pack(out + n * C + c, gpu::load_pack(table + row * C + c));
    else out[n * C + c] = table[row * C + c];
  }
}

template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads) embedding_bwd_kernel(const T* __restrict__ dout,
                                                                   const int32_t* __restrict__ ids,
                                                                   float* __restrict__ dtable, int64_t N, int V, int C,
                                                                   unsigned long long* err) {
  constexpr int P = VEC ? gpu::Pack<T>::N : 1;
  const int c = (blockIdx.x * kThreads + threadIdx.x) * P;
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const int32_t id = ids[n];
    const int64_t row = blockIdx.x == 0 ? checked_row(id, n, V, err) : (id < 0 ? 0 : (id >= V ? V - 1 : id));
    if (c >= C) continue;
    float* d = dtable + row * C + c;
    if constexpr (VEC) {
      const auto g = gpu::load_pack(dout + n * C + c);
#pragma unroll
      for (int i = 0; i < P; i++) atomicAdd(d + i, to_f32(g.v[i]));
    } else {
      atomicAdd(d, to_f32(dout[n * C + c]));
    }
  }
}

__global__ void embedding_scan_ids_kernel(const int32_t* __restrict__ ids, int64_t N, int V,
                                          unsigned long long* err) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += int64_t(gridDim.x) * blockDim.x)
    checked_row(ids[n], n, V, err);
}

// The row loop runs over grid.y; 65535 is the grid.y limit of both vendors.
dim3 row_grid(int64_t N, int C, int P) {
  return dim3(gpu::ceil_div(gpu::ceil_div(C, P), kThreads), unsigned(std::min<int64_t>(N, 65535)));
}

}  // namespace

void embedding_fwd_gpu(const Tensor& ids, const Tensor& table, Tensor& out) {
  const int64_t N = ids.numel();
  const int V = int(table.size(0)), C = int(table.size(1));
  if (N == 0) return;
  auto* err = reinterpret_cast<unsigned long long*>(error_word());
  ANVIL_DISPATCH_FLOAT(table.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = C % P == 0 && gpu::aligned16(table.data_ptr()) && gpu::aligned16(out.data_ptr());
    auto kernel = vec ? embedding_fwd_kernel<T, true> : embedding_fwd_kernel<T, false>;
    kernel<<<row_grid(N, C, vec ? P : 1), kThreads, 0, gpu::stream()>>>(ids.data<int32_t>(), table.data<T>(),
                                                                       out.data<T>(), N, V, C, err);
    ANVIL_LAUNCH_CHECK();
  });
}

void embedding_bwd_gpu(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const int64_t N = ids.numel();
  const int V = int(dtable.size(0)), C = int(dtable.size(1));
  if (N == 0) return;
  auto* err = reinterpret_cast<unsigned long long*>(error_word());
  ANVIL_DISPATCH_FLOAT(dout.dtype(), T, {
    constexpr int P = gpu::Pack<T>::N;
    const bool vec = C % P == 0 && gpu::aligned16(dout.data_ptr());
    auto kernel = vec ? embedding_bwd_kernel<T, true> : embedding_bwd_kernel<T, false>;
    kernel<<<row_grid(N, C, vec ? P : 1), kThreads, 0, gpu::stream()>>>(dout.data<T>(), ids.data<int32_t>(),
                                                                       dtable.data<float>(), N, V, C, err);
    ANVIL_LAUNCH_CHECK();
  });
}

EmbeddingBadId embedding_first_bad_id_gpu(const Tensor& ids, int64_t V) {
  uint64_t* word = error_word();
  const int64_t N = ids.numel();
  if (N > 0) {
    const int blocks = int(std::min<int64_t>(gpu::ceil_div(N, kThreads), 1024));
    embedding_scan_ids_kernel<<<blocks, kThreads, 0, gpu::stream()>>>(
        ids.data<int32_t>(), N, int(V), reinterpret_cast<unsigned long long*>(word));
    ANVIL_LAUNCH_CHECK();
  }
  uint64_t bad = kNoError;
  gpu::copy_d2h(&bad, word, sizeof bad);  // stream-ordered after every earlier embedding kernel; synchronises
  if (bad == kNoError) return {};
  gpu::memset_async(word, 0xff, sizeof(uint64_t));
  return {true, int64_t(bad >> kValueBits), int32_t(uint32_t(bad))};
}

}  // namespace anvil
