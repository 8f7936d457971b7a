// CPU multi-tensor AdamW and gradient sum of squares. The CPU has no launch overhead to save: AdamW runs the
// single-tensor path per tensor. The sum of squares runs every 4096-element chunk of every tensor in one
// parallel loop (a model's many small tensors would leave threads idle one tensor at a time), then adds the
// chunk sums per tensor and the tensor sums into out in order: the same f32 operations in the same order as
// sum_squares (kernels/elementwise, 4096-element chunks) on each tensor, so the gradient norm is unchanged to
// the bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/adamw/adamw.h"

namespace anvil {

namespace {
constexpr int64_t kChunk = 4096;  // sum_squares' chunk: keep equal, or CPU gradient norms change in the last bits
}  // namespace

void adamw_step_multi_cpu(std::vector<AdamWTensor>& ts, const AdamWParams& p) {
  for (AdamWTensor& t : ts) {
    if (t.param.numel() == 0) continue;
    AdamWParams q = p;
    q.weight_decay = t.weight_decay;
    adamw_step_cpu(t.param, t.grad, t.m, t.v, q, t.param_out);
  }
}

void grad_sum_squares_multi_cpu(const std::vector<Tensor>& xs, Tensor& out) {
  // first[k]: index of tensor k's first chunk; chunks of all tensors are numbered consecutively.
  std::vector<int64_t> first(xs.size() + 1, 0);
  for (size_t k = 0; k < xs.size(); k++) first[k + 1] = first[k] + (xs[k].numel() + kChunk - 1) / kChunk;
  const int64_t chunks = first.back();
  std::vector<float> part(size_t(chunks), 0.f);
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t c = 0; c < chunks; c++) {
    // The tensor whose chunk range holds c: the last k with first[k] <= c (empty tensors own no chunk).
    const size_t k = size_t(std::upper_bound(first.begin(), first.end(), c) - first.begin()) - 1;
    const float* x = xs[k].data<float>();
    const int64_t n = xs[k].numel(), begin = (c - first[k]) * kChunk, end = std::min(n, begin + kChunk);
    float s = 0;
    for (int64_t i = begin; i < end; i++) s += x[i] * x[i];
    part[size_t(c)] = s;
  }
  float& o = out.data<float>()[0];
  for (size_t k = 0; k < xs.size(); k++) {
    if (first[k + 1] == first[k]) continue;  // empty: sum_squares returns before touching out
    float s = 0;
    for (int64_t c = first[k]; c < first[k + 1]; c++) s += part[size_t(c)];
    o += s;
  }
}

void zero_multi_cpu(const std::vector<Tensor>& xs) {
  for (const Tensor& x : xs)
    if (x.nbytes() > 0) std::memset(x.data_ptr(), 0, size_t(x.nbytes()));
}

}  // namespace anvil
