// The descriptor tables of the multi-tensor kernels (adamw_multi.cu, grad_sum_squares.cu, zero_multi.cu): one
// entry per tensor, each owning a run of consecutive blocks of the grid that starts at its `first_block`.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/gpu/common.cuh"  // first: the vendor runtime before core/ headers

#include "core/tensor.h"

namespace anvil::gpu {

// The entry of the single-buffer multi-tensor kernels (sum of squares, zero): one tensor as n units (elements or
// bytes, as its kernel counts them) from p.
struct SpanEntry {
  void* p;
  int64_t n;
  int64_t first_block;  // blocks of the entries before this one
  int32_t vec;          // p 16-byte aligned
  int32_t unused;       // explicit padding: tables are compared as bytes
};
static_assert(sizeof(SpanEntry) == 32, "no implicit padding in a table entry");

// One SpanEntry per non-empty tensor of xs, in order, counting bytes (bytes = true) or elements, a block per
// `chunk` units; `blocks` gets their total, checked to fit one launch (`op` names the caller in the error).
std::vector<SpanEntry> span_table(const std::vector<Tensor>& xs, bool bytes, int64_t chunk, const char* op,
                                  int64_t& blocks);

// A device copy of `bytes` (a table of entries) on the current device. Tables are kept, up to 16, keyed on
// their bytes (pointers, sizes, offsets): a training loop passes the same tensors every step, so after the
// first step no table is copied (gpu::copy_h2d waits for the stream, which would stall the host that should be
// enqueuing the next kernels). The least recently used table is dropped past 16. Not for use while the stream
// is being captured: a new table's copy synchronizes, and a table in a graph could be dropped under it.
const void* cached_table(const std::vector<unsigned char>& bytes);

// The host bytes of a table of plain entries. Entries must have no implicit padding (each kernel's entry type
// static_asserts its size), so equal tables compare equal byte for byte.
template <class E>
std::vector<unsigned char> table_bytes(const std::vector<E>& entries) {
  static_assert(std::is_trivially_copyable_v<E>, "table entries are copied as bytes");
  const auto* b = reinterpret_cast<const unsigned char*>(entries.data());
  return std::vector<unsigned char>(b, b + entries.size() * sizeof(E));
}

// The entry whose block run holds block b: the last one with first_block <= b (entries in increasing
// first_block, each owning at least one block). Every thread of a block searches the same addresses: about
// log2(count) dependent loads from L2 (8 for Mamba-130m's 242 tensors) before the block's own traffic.
template <class E>
__device__ __forceinline__ int find_entry(const E* __restrict__ table, int count, int64_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_block <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace anvil::gpu
