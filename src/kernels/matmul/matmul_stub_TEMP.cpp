// TEMPORARY test stub of anvil::matmul for the cross_entropy branch (the real matmul is written elsewhere).
// Naive CPU loops with f32 accumulation; the GPU throws. Removed before the branch's final commit.
#include <vector>

#include "kernels/matmul/matmul.h"

namespace anvil {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta) {
  ANVIL_CHECK(a.device().is_cpu(), "matmul(stub)", "cpu tensors", a.describe());
  ANVIL_CHECK(a.is_contiguous() && b.is_contiguous() && c.is_contiguous(), "matmul(stub)", "contiguous", "strided");
  const int64_t M = trans_a ? a.size(1) : a.size(0), K = trans_a ? a.size(0) : a.size(1);
  const int64_t N = trans_b ? b.size(0) : b.size(1);
  ANVIL_CHECK((trans_b ? b.size(1) : b.size(0)) == K, "matmul(stub)", K, b.describe());
  ANVIL_CHECK(c.size(0) == M && c.size(1) == N, "matmul(stub)", str(M, "x", N), c.describe());
  const DType at = a.dtype(), ct = c.dtype();
  const void *pa = a.data_ptr(), *pb = b.data_ptr();
  void* pc = c.data_ptr();
#pragma omp parallel for
  for (int64_t i = 0; i < M; i++) {
    std::vector<float> arow(K);
    for (int64_t k = 0; k < K; k++) arow[k] = load_as_f32(pa, at, size_t(trans_a ? k * M + i : i * K + k));
    for (int64_t j = 0; j < N; j++) {
      float s = 0.f;
      for (int64_t k = 0; k < K; k++) s += arow[k] * load_as_f32(pb, at, size_t(trans_b ? j * K + k : k * N + j));
      const float old = beta == 0.f ? 0.f : beta * load_as_f32(pc, ct, size_t(i * N + j));
      store_from_f32(pc, ct, size_t(i * N + j), alpha * s + old);
    }
  }
}

}  // namespace anvil
