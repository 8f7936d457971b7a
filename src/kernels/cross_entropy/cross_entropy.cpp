// cross_entropy front-ends: argument checks, then the chunk loop shared by every backend. The chunk GEMMs
// go through anvil::matmul (OpenBLAS / cuBLASLt / the portable kernel); the row-wise pieces are
// cross_entropy_*_{cpu,gpu}.
#include <algorithm>

#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/matmul/matmul.h"

namespace anvil {
namespace {

// h (N, C), w (V, C) in one float dtype, targets (N) i32, all contiguous on one device.
void check_inputs(const char* op, const Tensor& h, const Tensor& w, const Tensor& targets, int64_t chunk) {
  check_dim(op, "h", h, 2);
  check_dtype_in(op, "h", h, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "h", h);
  check_dim(op, "w", w, 2);
  ANVIL_CHECK(h.size(1) > 0 && w.size(0) > 0, op, "C > 0 and V > 0", str("h ", h.describe(), ", w ", w.describe()));
  check_shape(op, "w", w, {w.size(0), h.size(1)});
  check_dtype(op, "w", w, h.dtype());
  check_contiguous(op, "w", w);
  check_same_device(op, h, "h", w, "w");
  check_shape(op, "targets", targets, {h.size(0)});
  check_dtype(op, "targets", targets, DType::i32);
  check_contiguous(op, "targets", targets);
  check_same_device(op, h, "h", targets, "targets");
  ANVIL_CHECK(chunk >= 0, op, "chunk >= 0 (0 = choose)", chunk);
}

void check_f32_vector(const char* op, const char* name, const Tensor& t, const Tensor& h) {
  check_shape(op, name, t, {h.size(0)});
  check_dtype(op, name, t, DType::f32);
  check_contiguous(op, name, t);
  check_same_device(op, h, "h", t, name);
}

// The backward's tensors: dloss (N) f32, dh (N, C) in h's dtype and dw (V, C) f32, contiguous, on h's device.
void check_grads(const char* op, const Tensor& dloss, const Tensor& h, const Tensor& w, const Tensor& dh,
                 const Tensor& dw) {
  check_f32_vector(op, "dloss", dloss, h);
  check_shape(op, "dh", dh, h.shape());
  check_dtype(op, "dh", dh, h.dtype());
  check_contiguous(op, "dh", dh);
  check_same_device(op, h, "h", dh, "dh");
  check_shape(op, "dw", dw, w.shape());
  check_dtype(op, "dw", dw, DType::f32);
  check_contiguous(op, "dw", dw);
  check_same_device(op, h, "h", dw, "dw");
}

// Targets are data, not shapes: an out-of-range one would index past the logits, so every call reads them on
// the host first (a 4N-byte copy and a sync on the GPU; negligible next to the 2NVC-flop GEMMs).
void check_targets(const char* op, const Tensor& targets, int64_t V) {
  const Tensor t = targets.to(Device::cpu());
  const int32_t* p = t.data<int32_t>();
  for (int64_t n = 0; n < t.numel(); n++)
    ANVIL_CHECK(p[n] == -1 || (p[n] >= 0 && p[n] < V), op, str("targets[", n, "] in [0, ", V, ") or -1"), p[n]);
}

// Vocabulary rows per chunk: the request, or about 256 MB of f32 logits (64M values), a multiple of 128
// columns (GEMM tile friendly) once above 128. The backward's dh (N, C) f32 is read and written once per chunk
// (dh += dz @ w_chunk): at 64 MB chunks Mamba-130m's head (N = 32768, V = 50280: 99 chunks) moved 100 MB of dh
// per chunk, 48 µs each at copy bandwidth, nearly half of that GEMM's time on the H200; 256 MB makes it 25.
int64_t chunk_cols(int64_t chunk, int64_t N, int64_t V) {
  int64_t vc = chunk > 0 ? chunk : std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(N, 1));
  if (chunk == 0 && vc > 128) vc = vc / 128 * 128;
  return std::min(vc, V);
}

// Rows per pass of cross_entropy_fwd_bwd: the request, or about 1 GB of f32 logits (256M values), a multiple of
// 128 rows once above 128. Each pass reads and writes dw (V, C) f32 once (dw += dlogits^T @ h_chunk): at
// Mamba-130m's head 7 passes move 2.2 GB of dw, where 256 MB passes would move 7.7 GB (1.8 ms on an H200).
// The buffers are rows x V f32 logits plus, for 16-bit h, rows x V dlogits: 1.5 GB at the default.
int64_t chunk_rows_of(int64_t chunk_rows, int64_t N, int64_t V) {
  int64_t r = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, (int64_t(256) << 20) / std::max<int64_t>(V, 1));
  if (chunk_rows == 0 && r > 128) r = r / 128 * 128;
  return std::min(r, N);
}

// The backward's buffers for n logit values: f32 logits, and dlogits in h's dtype dt, since they feed GEMMs with
// w and h (for f32 the same buffer: the dlogits overwrite the logits in place).
void pass_buffers(int64_t n, DType dt, Device dev, Tensor& logits, Tensor& dlogits) {
  logits = Tensor::empty({n}, DType::f32, dev);
  dlogits = dt == DType::f32 ? logits : Tensor::empty({n}, dt, dev);
}

// The (N, vc) leading part of a flat chunk buffer.
Tensor chunk_view(const Tensor& buf, int64_t N, int64_t vc) { return buf.slice(0, 0, N * vc).view({N, vc}); }

#ifdef ANVIL_HAS_GPU
#define ANVIL_CE_BACKEND(dev, name, ...) \
  ((dev).is_cpu() ? cross_entropy_##name##_cpu(__VA_ARGS__) : cross_entropy_##name##_gpu(__VA_ARGS__))
#else
#define ANVIL_CE_BACKEND(dev, name, ...) cross_entropy_##name##_cpu(__VA_ARGS__)
#endif

}  // namespace

void cross_entropy_fwd(const Tensor& h, const Tensor& w, const Tensor& targets, Tensor& loss, Tensor& lse,
                       int64_t chunk) {
  const char* op = "cross_entropy_fwd";
  check_inputs(op, h, w, targets, chunk);
  check_f32_vector(op, "loss", loss, h);
  check_f32_vector(op, "lse", lse, h);
  const int64_t N = h.size(0), V = w.size(0);
  check_targets(op, targets, V);
  if (N == 0) return;
  const Device dev = h.device();
  const int64_t Vc = chunk_cols(chunk, N, V);
  Tensor logits = Tensor::empty({N * Vc}, DType::f32, dev);
  Tensor m = Tensor::empty({N}, DType::f32, dev), s = Tensor::empty({N}, DType::f32, dev);
  Tensor tgt = Tensor::empty({N}, DType::f32, dev);
  for (int64_t v0 = 0; v0 < V; v0 += Vc) {
    const int64_t vc = std::min(Vc, V - v0);
    Tensor z = chunk_view(logits, N, vc);
    matmul(h, w.slice(0, v0, v0 + vc), z, false, true, 1.f, 0.f);  // z (N, vc) = h @ w_chunk^T
    ANVIL_CE_BACKEND(dev, chunk_fwd, z, targets, v0, v0 == 0, m, s, tgt);
  }
  ANVIL_CE_BACKEND(dev, finish, m, s, tgt, targets, loss, lse);
}

void cross_entropy_bwd(const Tensor& dloss, const Tensor& h, const Tensor& w, const Tensor& targets,
                       const Tensor& lse, Tensor& dh, Tensor& dw, int64_t chunk) {
  const char* op = "cross_entropy_bwd";
  check_inputs(op, h, w, targets, chunk);
  check_f32_vector(op, "lse", lse, h);
  check_grads(op, dloss, h, w, dh, dw);
  const int64_t N = h.size(0), V = w.size(0);
  check_targets(op, targets, V);
  if (N == 0) return;
  const Device dev = h.device();
  const DType dt = h.dtype();
  const int64_t Vc = chunk_cols(chunk, N, V);
  Tensor logits, dlogits;
  pass_buffers(N * Vc, dt, dev, logits, dlogits);
  // dh sums over every chunk: in f32 (dh itself when f32), so a 1000-chunk vocabulary rounds once, not 1000x.
  Tensor dh_acc = dt == DType::f32 ? dh : Tensor::empty(dh.shape(), DType::f32, dev);
  for (int64_t v0 = 0; v0 < V; v0 += Vc) {
    const int64_t vc = std::min(Vc, V - v0);
    const Tensor wc = w.slice(0, v0, v0 + vc);
    Tensor z = chunk_view(logits, N, vc), dz = chunk_view(dlogits, N, vc), dwc = dw.slice(0, v0, v0 + vc);
    matmul(h, wc, z, false, true, 1.f, 0.f);
    ANVIL_CE_BACKEND(dev, chunk_bwd, z, targets, v0, lse, dloss, dz);
    matmul(dz, wc, dh_acc, false, false, 1.f, v0 == 0 ? 0.f : 1.f);  // dh (N, C) (+)= dz (N, vc) @ w_chunk
    matmul(dz, h, dwc, true, false, 1.f, 1.f);                       // dw_chunk (vc, C) += dz^T @ h
  }
  if (dt != DType::f32) ANVIL_CE_BACKEND(dev, cast, dh_acc, dh);
}

void cross_entropy_fwd_bwd(const Tensor& h, const Tensor& w, const Tensor& targets, const Tensor& dloss,
                           Tensor& loss, Tensor& dh, Tensor& dw, int64_t chunk_rows) {
  const char* op = "cross_entropy_fwd_bwd";
  check_inputs(op, h, w, targets, chunk_rows);
  check_f32_vector(op, "loss", loss, h);
  check_grads(op, dloss, h, w, dh, dw);
  const int64_t N = h.size(0), V = w.size(0);
  check_targets(op, targets, V);
  if (N == 0) return;
  const Device dev = h.device();
  const DType dt = h.dtype();
  const int64_t R = chunk_rows_of(chunk_rows, N, V);
  Tensor logits, dlogits;
  pass_buffers(R * V, dt, dev, logits, dlogits);
  Tensor m = Tensor::empty({R}, DType::f32, dev), s = Tensor::empty({R}, DType::f32, dev);
  Tensor tgt = Tensor::empty({R}, DType::f32, dev), lse = Tensor::empty({R}, DType::f32, dev);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int64_t r1 = std::min(N, r0 + R), rn = r1 - r0;
    const Tensor hc = h.slice(0, r0, r1), tc = targets.slice(0, r0, r1), dlc = dloss.slice(0, r0, r1);
    Tensor lossc = loss.slice(0, r0, r1), dhc = dh.slice(0, r0, r1);
    Tensor mc = m.slice(0, 0, rn), sc = s.slice(0, 0, rn), tgc = tgt.slice(0, 0, rn), lsec = lse.slice(0, 0, rn);
    Tensor z = chunk_view(logits, rn, V), dz = chunk_view(dlogits, rn, V);
    matmul(hc, w, z, false, true, 1.f, 0.f);  // z (rn, V) = h_chunk @ w^T
    ANVIL_CE_BACKEND(dev, chunk_fwd, z, tc, 0, true, mc, sc, tgc);
    ANVIL_CE_BACKEND(dev, finish, mc, sc, tgc, tc, lossc, lsec);
    ANVIL_CE_BACKEND(dev, chunk_bwd, z, tc, 0, lsec, dlc, dz);
    matmul(dz, w, dhc, false, false, 1.f, 0.f);  // dh_chunk (rn, C) = dz (rn, V) @ w
    matmul(dz, hc, dw, true, false, 1.f, 1.f);   // dw (V, C) += dz^T @ h_chunk
  }
}

}  // namespace anvil
