// GPU multi-tensor AdamW: one launch updates every tensor of a list. The list is cut into 16384-element chunks,
// a block per chunk; a chunk map (one int per chunk, cached with the descriptor table) names each block's tensor.
// Each element gets the same code as adamw.cu (adamw_update, scalars folded on the host by adamw_scalars), so the
// results equal the single-tensor kernel's to the bit (tests/ops/adamw_cases.cpp compares them).
//
// Why this shape (H200, Mamba-130m's 242 tensors, 129M parameters, ~30 bytes each): the first version gave each
// thread 8 consecutive elements, two 16-byte loads 32 bytes apart per lane (each load instruction of a warp
// touched half of 32 sectors), through generic loads and stores (the pointers come from a table), and found its
// tensor by a binary search (8 dependent L2 loads). It ran at 63-65% of copy (1391-1434 us), DRAM 63% busy.
// Now a warp's loads are contiguous (512 bytes per instruction), global and evict-first, and the tensor is one
// load: 83-84% (1076-1094 us), DRAM 77%; 86% with one row per step (update_chunk). Persistent blocks walking the
// chunks measured the same (1094 us) and were not kept.
//
// Weight decay is per tensor but folds into the per-step scalar 1 - lr * wd: computed on the host for each
// distinct weight decay (up to 8 per launch, passed by value with the step's scalars) so the table itself does
// not change with lr and stays cached.
#include "backends/gpu/common.cuh"  // first: the vendor runtime before core/ headers

#include <algorithm>
#include <type_traits>

#include "kernels/adamw/adamw_math.h"
#include "kernels/adamw/tensor_table.cuh"

namespace anvil {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16384;  // a multiple of 4: every chunk of an aligned tensor starts aligned
constexpr int kMaxDecays = 8;

enum OutKind : int32_t { kOutNone = 0, kOutBf16 = 1, kOutF16 = 2 };

struct Entry {
  float* p;
  const float* g;
  float* m;
  float* v;
  void* out;            // bf16 / f16 compute copy, or null
  int64_t n;
  int64_t first_block;  // blocks of the entries before this one
  int32_t out_kind;     // OutKind
  int32_t decay_slot;   // index into Decays::v
  int32_t vec;          // p g m v and out 16-byte aligned: packs of 4 elements
  int32_t unused;       // explicit padding: tables are compared as bytes (tensor_table.cuh)
};
static_assert(sizeof(Entry) == 72, "no implicit padding in a table entry");

struct Decays {
  float v[kMaxDecays];  // 1 - lr * wd per slot, as adamw_scalars computes it
};

__device__ __forceinline__ void store_once(float* p, const gpu::Pack<float>& v) {
  const uint4 w = gpu::pack_bits(v);
  anvil_store16_once(p, w.x, w.y, w.z, w.w);
}

// Elements [begin, end) of one tensor; TO = void: no compute copy. The vector path takes rows of 4 x kThreads
// elements, thread t the 4 at 4t, so each 16-byte load instruction of a warp reads 512 consecutive bytes, and the
// 4 bf16/f16 results leave in one 8-byte store (as a struct copy nvcc split such stores in two). Loads and stores
// are the vendor's read-once stream (anvil_load16_once). One row per step at 6 blocks per SM measured 1047 /
// 1162 us against 1072 / 1204 for two rows per step at 4 blocks (58 registers), in one run on the H200.
template <class TO>
__device__ __forceinline__ void update_chunk(const Entry& e, int64_t begin, int64_t end, const AdamWScalars& s) {
  constexpr int kStep = 4 * kThreads;  // elements per row of the block
  TO* out = static_cast<TO*>(e.out);
  int64_t done = begin;
  if (e.vec) {
    const int64_t rows = (end - begin) / kStep;
    for (int64_t r = 0; r < rows; r++) {
      const int64_t i = begin + r * kStep + 4 * threadIdx.x;
      gpu::Pack<float> pp = gpu::unpack<float>(anvil_load16_once(e.p + i));
      const gpu::Pack<float> gg = gpu::unpack<float>(anvil_load16_once(e.g + i));
      gpu::Pack<float> mm = gpu::unpack<float>(anvil_load16_once(e.m + i));
      gpu::Pack<float> vv = gpu::unpack<float>(anvil_load16_once(e.v + i));
#pragma unroll
      for (int j = 0; j < 4; j++) adamw_update(s, pp.v[j], gg.v[j], mm.v[j], vv.v[j]);
      store_once(e.p + i, pp);
      store_once(e.m + i, mm);
      store_once(e.v + i, vv);
      if constexpr (!std::is_void_v<TO>) {
        uint32_t w[2];
#pragma unroll
        for (int k = 0; k < 2; k++)
          w[k] = gpu::raw_bits(from_f32<TO>(pp.v[2 * k])) | gpu::raw_bits(from_f32<TO>(pp.v[2 * k + 1])) << 16;
        anvil_store8_once(out + i, w[0], w[1]);
      }
    }
    done = begin + rows * kStep;
  }
  for (int64_t i = done + threadIdx.x; i < end; i += kThreads) {
    float pi = e.p[i], mi = e.m[i], vi = e.v[i];
    adamw_update(s, pi, e.g[i], mi, vi);
    e.p[i] = pi;
    e.m[i] = mi;
    e.v[i] = vi;
    if constexpr (!std::is_void_v<TO>) out[i] = from_f32<TO>(pi);
  }
}

// Block c updates chunk c - first_block of tensor chunk_entry[c].
// 6 blocks of 256 per SM (<= 40 registers): 48 warps, each thread with 64 bytes of loads in flight.
__global__ void __launch_bounds__(kThreads, 6) adamw_multi_kernel(const Entry* __restrict__ table,
                                                                   const int32_t* __restrict__ chunk_entry,
                                                                   AdamWScalars s, Decays d) {
  const int64_t c = blockIdx.x;
  const Entry e = table[chunk_entry[c]];
  // A select per slot instead of d.v[slot]: a runtime index into a kernel argument copies it to local memory.
  float decay = d.v[0];
#pragma unroll
  for (int k = 1; k < kMaxDecays; k++) decay = e.decay_slot == k ? d.v[k] : decay;
  s.decay = decay;
  const int64_t begin = (c - e.first_block) * kChunk, end = begin + kChunk < e.n ? begin + kChunk : e.n;
  switch (e.out_kind) {  // one value per block: no divergence
    case kOutBf16: return update_chunk<bf16>(e, begin, end, s);
    case kOutF16: return update_chunk<f16>(e, begin, end, s);
    default: return update_chunk<void>(e, begin, end, s);
  }
}

}  // namespace

void adamw_step_multi_gpu(std::vector<AdamWTensor>& ts, const AdamWParams& p) {
  // Distinct weight decays in order of first appearance; tensor i uses slot[i].
  std::vector<float> wds;
  std::vector<int> slot(ts.size());
  for (size_t i = 0; i < ts.size(); i++) {
    auto it = std::find(wds.begin(), wds.end(), ts[i].weight_decay);
    slot[i] = int(it - wds.begin());
    if (it == wds.end()) wds.push_back(ts[i].weight_decay);
  }
  const AdamWScalars s = adamw_scalars(p);  // p.weight_decay = 0; each launch sets decay from its slots
  // One launch per 8 distinct weight decays (one for any ordinary model: decay or none).
  for (size_t g0 = 0; g0 < wds.size(); g0 += kMaxDecays) {
    Decays d{};
    for (size_t k = 0; k < kMaxDecays && g0 + k < wds.size(); k++) {
      AdamWParams q = p;
      q.weight_decay = wds[g0 + k];
      d.v[k] = adamw_scalars(q).decay;
    }
    std::vector<Entry> table;
    std::vector<int32_t> chunk_entry;  // the tensor of each chunk
    int64_t blocks = 0;
    for (size_t i = 0; i < ts.size(); i++) {
      const AdamWTensor& t = ts[i];
      const int64_t n = t.param.numel();
      if (n == 0 || size_t(slot[i]) / kMaxDecays != g0 / kMaxDecays) continue;
      Entry e;
      e.p = t.param.data<float>();
      e.g = t.grad.data<float>();
      e.m = t.m.data<float>();
      e.v = t.v.data<float>();
      e.out = t.param_out.defined() ? t.param_out.data_ptr() : nullptr;
      e.n = n;
      e.first_block = blocks;
      e.out_kind = !t.param_out.defined() ? kOutNone : t.param_out.dtype() == DType::bf16 ? kOutBf16 : kOutF16;
      e.decay_slot = int32_t(size_t(slot[i]) % kMaxDecays);
      e.vec = gpu::aligned16(e.p) && gpu::aligned16(e.g) && gpu::aligned16(e.m) && gpu::aligned16(e.v) &&
              gpu::aligned16(e.out);  // null when there is no copy
      e.unused = 0;
      const int64_t nc = (n + kChunk - 1) / kChunk;
      ANVIL_CHECK(blocks + nc <= INT32_MAX, "adamw_step_multi", str("at most ", INT32_MAX, " chunks"), blocks + nc);
      chunk_entry.insert(chunk_entry.end(), size_t(nc), int32_t(table.size()));
      table.push_back(e);
      blocks += nc;
    }
    if (table.empty()) continue;  // only empty tensors with these weight decays
    // One cached blob: the entries, then the chunk map (Entry is 8-byte aligned, so the map is 4-byte aligned).
    std::vector<unsigned char> bytes = gpu::table_bytes(table);
    const auto* map = reinterpret_cast<const unsigned char*>(chunk_entry.data());
    bytes.insert(bytes.end(), map, map + chunk_entry.size() * sizeof(int32_t));
    const auto* dt = static_cast<const Entry*>(gpu::cached_table(bytes));
    const auto* dmap = reinterpret_cast<const int32_t*>(dt + table.size());
    adamw_multi_kernel<<<unsigned(blocks), kThreads, 0, gpu::stream()>>>(dt, dmap, s, d);
    ANVIL_LAUNCH_CHECK();
  }
}

}  // namespace anvil
