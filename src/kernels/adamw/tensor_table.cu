// The device-side cache of multi-tensor descriptor tables (see tensor_table.cuh).
#include "kernels/adamw/tensor_table.cuh"

#include <mutex>

namespace anvil::gpu {

namespace {
constexpr size_t kCapacity = 16;  // tables kept: a training run uses 3 (AdamW, gradient norm, zero), tests more

struct Cached {
  int device;
  std::vector<unsigned char> bytes;
  void* ptr;
  uint64_t used;  // the call count when last returned: the smallest goes first
};
}  // namespace

const void* cached_table(const std::vector<unsigned char>& bytes) {
  static std::mutex mu;
  static auto* cache = new std::vector<Cached>();  // never destroyed, as the allocator it frees into
  static uint64_t calls = 0;
  std::lock_guard<std::mutex> lock(mu);
  const int device = current_device();
  calls++;
  for (Cached& c : *cache)
    if (c.device == device && c.bytes == bytes) {
      c.used = calls;
      return c.ptr;
    }
  if (cache->size() >= kCapacity) {
    auto lru = cache->begin();
    for (auto it = cache->begin(); it != cache->end(); ++it)
      if (it->used < lru->used) lru = it;
    // Kernels still queued may read it: the block goes back to the caching allocator, whose next owner writes
    // it only through work queued after them on the stream.
    free(lru->ptr);
    cache->erase(lru);
  }
  void* p = alloc(bytes.size());
  copy_h2d(p, bytes.data(), bytes.size());
  cache->push_back({device, bytes, p, calls});
  return p;
}

std::vector<SpanEntry> span_table(const std::vector<Tensor>& xs, bool bytes, int64_t chunk, const char* op,
                                  int64_t& blocks) {
  std::vector<SpanEntry> table;
  blocks = 0;
  for (const Tensor& x : xs) {
    const int64_t n = bytes ? int64_t(x.nbytes()) : x.numel();
    if (n == 0) continue;
    table.push_back({x.data_ptr(), n, blocks, int32_t(aligned16(x.data_ptr())), 0});
    blocks += (n + chunk - 1) / chunk;
  }
  ANVIL_CHECK(blocks <= INT32_MAX, op, str("at most ", INT32_MAX, " blocks"), blocks);
  return table;
}

}  // namespace anvil::gpu
