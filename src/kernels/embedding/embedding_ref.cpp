// fp64 reference for embedding, written to be read. ids are assumed in range (the front-ends check them).
#include "kernels/embedding/embedding.h"

namespace anvil {

void embedding_fwd_ref(const int32_t* ids, const double* table, double* out, int64_t N, int64_t V, int64_t C) {
  (void)V;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) out[n * C + c] = table[int64_t(ids[n]) * C + c];
}

// The forward copies, so the backward adds each output row's gradient onto the row it came from.
void embedding_bwd_ref(const double* dout, const int32_t* ids, double* dtable, int64_t N, int64_t V, int64_t C) {
  (void)V;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) dtable[int64_t(ids[n]) * C + c] += dout[n * C + c];
}

}  // namespace anvil
