// CPU embedding: rows in parallel for the forward; columns in parallel for the backward, so repeated ids
// never race and the sum over n runs in the same order as the reference.
#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "kernels/embedding/embedding.h"

namespace anvil {

void embedding_fwd_cpu(const Tensor& ids, const Tensor& table, Tensor& out) {
  const int64_t N = ids.numel(), C = table.size(1);
  const int32_t* id = ids.data<int32_t>();
  const size_t row_bytes = size_t(C) * dtype_size(table.dtype());
  const char* src = static_cast<const char*>(table.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
#pragma omp parallel for
  for (int64_t n = 0; n < N; n++) std::memcpy(dst + n * row_bytes, src + int64_t(id[n]) * row_bytes, row_bytes);
}

template <class T>
static void bwd(const T* dout, const int32_t* id, float* dtable, int64_t N, int64_t C) {
  constexpr int64_t kCols = 256;  // 1 KB of each dtable row per task: rows stay in L1/L2 across n
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < C; c0 += kCols) {
    const int64_t c1 = std::min(C, c0 + kCols);
    for (int64_t n = 0; n < N; n++) {
      float* drow = dtable + int64_t(id[n]) * C;
      for (int64_t c = c0; c < c1; c++) drow[c] += to_f32(dout[n * C + c]);
    }
  }
}

void embedding_bwd_cpu(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const int64_t N = ids.numel(), C = dtable.size(1);
  ANVIL_DISPATCH_FLOAT(dout.dtype(), T, bwd<T>(dout.data<T>(), ids.data<int32_t>(), dtable.data<float>(), N, C));
}

}  // namespace anvil
