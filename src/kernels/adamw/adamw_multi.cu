// GPU multi-tensor AdamW: one launch updates every tensor of a list. Block b finds its tensor by a binary search
// of the descriptor table (block runs by prefix offsets) and updates a 16384-element chunk of it with the same
// per-element code as adamw.cu (adamw_update and scalars folded on the host by adamw_scalars), so it gives the
// single-tensor kernel's results to the bit (tests/ops/adamw_cases.cpp compares them).
//
// Chunk: 16384 elements move ~480 KB (28-30 bytes each) against the table search at the block's start (8
// dependent L2 loads for 242 tensors, ~1 us), which the other resident blocks' traffic covers. Mamba-130m's
// 129M parameters make ~8000 blocks; its small tensors (norms, biases, D, conv weights: 768-6144 elements) get
// one short block each.
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
constexpr int64_t kChunk = 16384;  // a multiple of 8: every chunk of an aligned tensor starts aligned
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
  int32_t vec;          // p g m v and out 16-byte aligned: 8 elements per thread and step
  int32_t unused;       // explicit padding: tables are compared as bytes (tensor_table.cuh)
};
static_assert(sizeof(Entry) == 72, "no implicit padding in a table entry");

struct Decays {
  float v[kMaxDecays];  // 1 - lr * wd per slot, as adamw_scalars computes it
};

// Elements [begin, end) of one tensor; TO = void: no compute copy. The vector path gives each thread 8
// consecutive elements, two 16-byte packs of p g m v, so the 8 bf16/f16 results leave in one 16-byte store
// (4 elements would need an 8-byte store, which nvcc 13 split into two 4-byte ones here).
template <class TO>
__device__ __forceinline__ void update_chunk(const Entry& e, int64_t begin, int64_t end, const AdamWScalars& s) {
  TO* out = static_cast<TO*>(e.out);
  int64_t done = begin;
  if (e.vec) {
    const int64_t n8 = (end - begin) / 8;
    for (int64_t k = threadIdx.x; k < n8; k += kThreads) {
      const int64_t i = begin + 8 * k;
      gpu::Pack<float> pp[2], gg[2], mm[2], vv[2];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        pp[h] = gpu::load_pack(e.p + i + 4 * h);
        gg[h] = gpu::load_pack(e.g + i + 4 * h);
        mm[h] = gpu::load_pack(e.m + i + 4 * h);
        vv[h] = gpu::load_pack(e.v + i + 4 * h);
      }
#pragma unroll
      for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int j = 0; j < 4; j++) adamw_update(s, pp[h].v[j], gg[h].v[j], mm[h].v[j], vv[h].v[j]);
        gpu::store_pack(e.p + i + 4 * h, pp[h]);
        gpu::store_pack(e.m + i + 4 * h, mm[h]);
        gpu::store_pack(e.v + i + 4 * h, vv[h]);
      }
      if constexpr (!std::is_void_v<TO>) {
        gpu::Pack<TO> o;
#pragma unroll
        for (int j = 0; j < 8; j++) o.v[j] = from_f32<TO>(pp[j / 4].v[j % 4]);
        gpu::store_pack(out + i, o);
      }
    }
    done = begin + 8 * n8;
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

__global__ void __launch_bounds__(kThreads) adamw_multi_kernel(const Entry* __restrict__ table, int count,
                                                                AdamWScalars s, Decays d) {
  const int64_t b = blockIdx.x;
  const Entry e = table[gpu::find_entry(table, count, b)];
  // A select per slot instead of d.v[slot]: a runtime index into a kernel argument copies it to local memory.
  float decay = d.v[0];
#pragma unroll
  for (int k = 1; k < kMaxDecays; k++) decay = e.decay_slot == k ? d.v[k] : decay;
  s.decay = decay;
  const int64_t begin = (b - e.first_block) * kChunk, end = begin + kChunk < e.n ? begin + kChunk : e.n;
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
      table.push_back(e);
      blocks += (n + kChunk - 1) / kChunk;
    }
    if (table.empty()) continue;  // only empty tensors with these weight decays
    ANVIL_CHECK(blocks <= INT32_MAX, "adamw_step_multi", str("at most ", INT32_MAX, " blocks"), blocks);
    const auto* dt = static_cast<const Entry*>(gpu::cached_table(gpu::table_bytes(table)));
    adamw_multi_kernel<<<int(blocks), kThreads, 0, gpu::stream()>>>(dt, int(table.size()), s, d);
    ANVIL_LAUNCH_CHECK();
  }
}

}  // namespace anvil
