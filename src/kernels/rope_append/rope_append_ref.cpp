// fp64 reference for rope_append (the spec): rope_fwd_ref on the q and k heads of each token, then stores.
#include <vector>

#include "kernels/rope/rope.h"
#include "kernels/rope_append/rope_append.h"

namespace anvil {

void rope_append_ref(const double* qkv, const int32_t* start, const double* inv_freq, double* q, double* k_cache,
                     double* v_cache, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HD, int64_t Tmax) {
  const int64_t QD = NH * HD, KVD = NKV * HD, row = QD + 2 * KVD;
  std::vector<double> k(static_cast<size_t>(KVD));
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      const int32_t pos = start[b] + int32_t(t);
      const double* x = qkv + (b * T + t) * row;
      rope_fwd_ref(x, &pos, inv_freq, q + (b * T + t) * QD, 1, NH, HD);
      if (pos < 0 || pos >= Tmax) continue;
      rope_fwd_ref(x + QD, &pos, inv_freq, k.data(), 1, NKV, HD);
      const int64_t o = (b * Tmax + pos) * KVD;
      for (int64_t i = 0; i < KVD; i++) {
        k_cache[o + i] = k[size_t(i)];
        v_cache[o + i] = x[QD + KVD + i];
      }
    }
}

}  // namespace anvil
