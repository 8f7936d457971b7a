// embedding: out[n] = table[ids[n]].
//
// Shapes:  ids (N) i32 [N = B*T];  table (V, C);  out, dout (N, C);  dtable (V, C) f32.
// Dtypes:  table, out, dout f32/bf16/f16 (the same); ids i32 on the table's device.
// Errors:  an id outside [0, V) is an anvil::Error naming its position and value.
//   CPU: the front-end scans the ids first (N compares, nothing next to the row copies) and throws at once.
//   GPU: checking would cost a device->host copy and a synchronisation per call (~10 µs, more than the
//        kernel itself at decode), so the kernels do not stop: they clamp a bad id into [0, V) (never reading
//        or writing outside the table) and record the first bad (position, value) in a per-device error word.
//        embedding_check_ids() scans ids into that same word, reads it back (one sync) and throws; call it
//        where a sync is cheap (once per batch), or validate ids on the host before uploading them.
// Gradients: dtable is accumulated into (+=); rows of repeated ids add up (GPU: f32 atomics, so the order
//        of the additions, and the last bits of a row hit by many ids, vary from run to run).
#pragma once
#include "core/tensor.h"

namespace anvil {

void embedding_fwd(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd(const Tensor& dout, const Tensor& ids, Tensor& dtable);
// Throws naming the first position whose id is outside [0, V), and its value. On GPU also reports (and
// clears) a bad id met by an earlier embedding_fwd/bwd on that device. ids (N) i32, any device.
void embedding_check_ids(const Tensor& ids, int64_t V);

void embedding_fwd_ref(const int32_t* ids, const double* table, double* out, int64_t N, int64_t V, int64_t C);
void embedding_bwd_ref(const double* dout, const int32_t* ids, double* dtable, int64_t N, int64_t V, int64_t C);

void embedding_fwd_cpu(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd_cpu(const Tensor& dout, const Tensor& ids, Tensor& dtable);
void embedding_fwd_gpu(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_bwd_gpu(const Tensor& dout, const Tensor& ids, Tensor& dtable);
// GPU half of embedding_check_ids: the first bad (position, value) among `ids` and every id the GPU kernels
// met since the last call on this device; clears the device's error word.
struct EmbeddingBadId {
  bool found = false;
  int64_t pos = 0;
  int32_t value = 0;
};
EmbeddingBadId embedding_first_bad_id_gpu(const Tensor& ids, int64_t V);

}  // namespace anvil
