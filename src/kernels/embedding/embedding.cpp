// embedding front-ends: argument checks, id validation and backend dispatch.
#include "kernels/embedding/embedding.h"

#include <cstdint>

namespace anvil {

static void check_ids(const char* op, const Tensor& ids) {
  check_dim(op, "ids", ids, 1);
  check_dtype(op, "ids", ids, DType::i32);
  check_contiguous(op, "ids", ids);
}

static void throw_bad_id(const char* op, int64_t pos, int64_t value, int64_t V) {
  ANVIL_THROW(op, str("ids in [0, ", V, ")"), str("ids[", pos, "] = ", value));
}

// CPU ids: scan and throw naming the first bad position. GPU ids: see embedding.h.
static void validate(const char* op, const Tensor& ids, int64_t V) {
  if (ids.device().is_cpu()) {
    const int32_t* id = ids.data<int32_t>();
    for (int64_t n = 0; n < ids.numel(); n++)
      if (id[n] < 0 || id[n] >= V) throw_bad_id(op, n, id[n], V);
    return;
  }
#ifdef ANVIL_HAS_GPU
  const EmbeddingBadId bad = embedding_first_bad_id_gpu(ids, V);
  if (bad.found) throw_bad_id(op, bad.pos, bad.value, V);
#endif
}

void embedding_check_ids(const Tensor& ids, int64_t V) {
  const char* op = "embedding_check_ids";
  check_ids(op, ids);
  ANVIL_CHECK(V > 0 && V <= INT32_MAX, op, "0 < V <= 2^31-1", V);
  validate(op, ids, V);
}

void embedding_fwd(const Tensor& ids, const Tensor& table, Tensor& out) {
  const char* op = "embedding_fwd";
  check_ids(op, ids);
  check_dim(op, "table", table, 2);
  check_dtype_in(op, "table", table, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "table", table);
  const int64_t N = ids.size(0), V = table.size(0), C = table.size(1);
  ANVIL_CHECK(V > 0 && V <= INT32_MAX && C > 0, op, "a table with 0 < V <= 2^31-1 rows and C > 0 columns",
              table.describe());
  check_shape(op, "out", out, {N, C});
  check_dtype(op, "out", out, table.dtype());
  check_contiguous(op, "out", out);
  check_same_device(op, table, "table", ids, "ids");
  check_same_device(op, table, "table", out, "out");
  if (table.device().is_cpu()) {
    validate(op, ids, V);
    return embedding_fwd_cpu(ids, table, out);
  }
#ifdef ANVIL_HAS_GPU
  return embedding_fwd_gpu(ids, table, out);
#endif
}

void embedding_bwd(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const char* op = "embedding_bwd";
  check_ids(op, ids);
  check_dim(op, "dtable", dtable, 2);
  check_dtype(op, "dtable", dtable, DType::f32);
  check_contiguous(op, "dtable", dtable);
  const int64_t N = ids.size(0), V = dtable.size(0), C = dtable.size(1);
  ANVIL_CHECK(V > 0 && V <= INT32_MAX && C > 0, op, "a dtable with 0 < V <= 2^31-1 rows and C > 0 columns",
              dtable.describe());
  check_shape(op, "dout", dout, {N, C});
  check_dtype_in(op, "dout", dout, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "dout", dout);
  check_same_device(op, dtable, "dtable", ids, "ids");
  check_same_device(op, dtable, "dtable", dout, "dout");
  if (dtable.device().is_cpu()) {
    validate(op, ids, V);
    return embedding_bwd_cpu(dout, ids, dtable);
  }
#ifdef ANVIL_HAS_GPU
  return embedding_bwd_gpu(dout, ids, dtable);
#endif
}

}  // namespace anvil
