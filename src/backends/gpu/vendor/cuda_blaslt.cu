// cuBLASLt behind gpu::vendor_gemm (see gemm.h): bf16/f16/f32 products with f32 compute (f32 output allowed for
// 16-bit inputs: gradient accumulation), and FP8 e4m3/e5m2 products with per-tensor or per-channel scales.
//
// Row-major mapping: cuBLASLt is column-major, and a row-major (R, C) matrix is the column-major (C, R) matrix,
// its transpose. So row-major c = op(a) op(b) is computed as column-major c^T = op(b)^T op(a)^T: cuBLASLt's
// "A" is our b, its "B" is our a, m = N, n = M, k = K. FP8 needs cuBLASLt's "TN" layout (its A transposed,
// both operands K-major): exactly our a (M, K) @ w (N, K)^T.
//
// Cached per shape/dtype/alignment key: the matmul descriptor, layouts and the algorithm (one heuristic query
// costs ~tens of µs, a decode step runs hundreds of GEMMs). One handle per device; one 32 MiB workspace per
// (device, stream) from the caching allocator (NVIDIA recommends 32 MiB on Hopper).
//
// Skinny products are timed once (tune below): the heuristic's first answer is a guess from the shape, and for a
// few activation rows against a large weight its pick need not stream the weight fastest.
#if defined(ANVIL_CUDA)
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/gpu/common.cuh"
#include "backends/gpu/vendor/blaslt_tune.h"
#include "backends/gpu/vendor/gemm.h"
#include "core/tensor.h"

namespace anvil::gpu {
namespace {

[[noreturn]] void blaslt_error(const char* call, cublasStatus_t s, const char* file, int line) {
  throw Error(call, "CUBLAS_STATUS_SUCCESS",
              str(cublasLtGetStatusName(s), " (", int(s), "): ", cublasLtGetStatusString(s)), file, line);
}

}  // namespace
}  // namespace anvil::gpu

// Every cuBLASLt call is checked: the error names the call, the status and file:line.
#define ANVIL_BLASLT_CHECK(call)                                                            \
  do {                                                                                      \
    cublasStatus_t anvil_st_ = (call);                                                     \
    if (anvil_st_ != CUBLAS_STATUS_SUCCESS) blaslt_error(#call, anvil_st_, __FILE__, __LINE__); \
  } while (0)

namespace anvil::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr int kCandidates = 8;  // heuristic answers kept for tuning

bool cuda_type(DType t, cudaDataType_t& out) {
  switch (t) {
    case DType::f32: out = CUDA_R_32F; return true;
    case DType::bf16: out = CUDA_R_16BF; return true;
    case DType::f16: out = CUDA_R_16F; return true;
    case DType::e4m3fn: out = CUDA_R_8F_E4M3; return true;
    case DType::e5m2: out = CUDA_R_8F_E5M2; return true;
    default: return false;  // the fnuz formats are AMD's
  }
}

// The largest power of two (<= 256) dividing the address and, in a batch, every product's start (the stride in
// bytes): heuristics pick kernels by it.
uint32_t alignment(const void* p, int64_t stride_bytes = 0) {
  uint32_t a = 256;
  while (a > 1 && (reinterpret_cast<uintptr_t>(p) % a || uint64_t(stride_bytes) % a)) a >>= 1;
  return a;
}

enum class ScaleMode : int { none, tensor, channel };

struct Key {
  int device;
  int64_t M, N, K;
  DType a, b, c;
  bool ta, tb;
  ScaleMode scale;
  uint32_t align_a, align_b, align_c;
  int64_t batch, stride_a, stride_b, stride_c;
  auto tie() const {
    return std::tie(device, M, N, K, a, b, c, ta, tb, scale, align_a, align_b, align_c, batch, stride_a, stride_b,
                    stride_c);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Plan {
  bool ok = false;  // false: cuBLASLt has no algorithm for this case (cached too, so we ask once)
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;  // cuBLASLt's A (our b), B (our a), C = D
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's answers, best guess first (tune)
  bool tuned = false;                             // algo is final: timed, or not to be timed
};

struct State {
  std::mutex mu;
  std::map<int, cublasLtHandle_t> handles;
  std::map<std::pair<int, StreamHandle>, void*> workspaces;
  std::map<Key, Plan> plans;
};
State& state() {
  static State* s = new State();  // never destroyed: descriptors and workspaces live as long as the process
  return *s;
}

template <class V>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
  ANVIL_BLASLT_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}
template <class V>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const V& v) {
  ANVIL_BLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
}

// Scale pointers are per call (the descriptor is shared; cuBLASLt reads it when the call is enqueued).
void set_scales(const Plan& p, const void* scale_A, const void* scale_B) {
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_A);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_B);
}

Plan make_plan(cublasLtHandle_t h, const Key& k, const void* scale_A, const void* scale_B) {
  Plan p;
  cudaDataType_t ta, tb, tc;
  cuda_type(k.a, ta), cuda_type(k.b, tb), cuda_type(k.c, tc);
  ANVIL_BLASLT_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(k.tb ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(k.ta ? CUBLAS_OP_T : CUBLAS_OP_N));
  if (k.scale == ScaleMode::channel) {  // cuBLASLt: A scales its m rows (our N), B its n columns (our M)
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
  }
  if (k.scale != ScaleMode::none) set_scales(p, scale_A, scale_B);
  // Column-major layouts (rows, cols, ld) of the row-major buffers; see the mapping at the top.
  const uint64_t rA = k.tb ? k.K : k.N, cA = k.tb ? k.N : k.K;
  const uint64_t rB = k.ta ? k.M : k.K, cB = k.ta ? k.K : k.M;
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.la, tb, rA, cA, int64_t(rA)));
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.lb, ta, rB, cB, int64_t(rB)));
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.lc, tc, uint64_t(k.N), uint64_t(k.M), k.N));
  if (k.batch > 1) {  // strided batch; a stride of 0 shares that operand (cuBLASLt's A is our b, its B our a)
    const int32_t count = int32_t(k.batch);
    for (auto [layout, stride] :
         {std::pair{p.la, k.stride_b}, std::pair{p.lb, k.stride_a}, std::pair{p.lc, k.stride_c}}) {
      ANVIL_BLASLT_CHECK(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                          &stride, sizeof(stride)));
    }
  }

  cublasLtMatmulPreference_t pref;
  ANVIL_BLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(kWorkspaceBytes));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_c);
  cublasLtMatmulHeuristicResult_t r[kCandidates]{};
  int n = 0;
  // Not ANVIL_BLASLT_CHECK: "no algorithm for this case" is an answer (we fall back), not an error.
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.la, p.lb, p.lc, p.lc, pref, kCandidates, r, &n);
  ANVIL_BLASLT_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (s == CUBLAS_STATUS_SUCCESS && n > 0) {
    for (int i = 0; i < n; i++)
      if (r[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(r[i].algo);
  }
  if (!p.candidates.empty()) {
    p.algo = p.candidates[0];
    p.ok = true;
    return p;
  }
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE)
    blaslt_error("cublasLtMatmulAlgoGetHeuristic", s, __FILE__, __LINE__);
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutDestroy(p.la));
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutDestroy(p.lb));
  ANVIL_BLASLT_CHECK(cublasLtMatrixLayoutDestroy(p.lc));
  ANVIL_BLASLT_CHECK(cublasLtMatmulDescDestroy(p.desc));
  return Plan{};
}

__global__ void broadcast_scalar_kernel(float* __restrict__ dst, const float* __restrict__ src, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = *src;
}

// Which cases cuBLASLt is asked for at all (its heuristic has the last word).
bool supported(const VendorGemm& g, const DeviceInfo& info, bool fp8) {
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.batch < 1 || g.batch > INT32_MAX) return false;
  cudaDataType_t t;
  if (!cuda_type(g.a_dtype, t) || !cuda_type(g.b_dtype, t) || !cuda_type(g.c_dtype, t)) return false;
  if (!fp8) {
    if (g.a_dtype != g.b_dtype || dtype_is_fp8(g.a_dtype)) return false;
    if (g.c_dtype != g.a_dtype && g.c_dtype != DType::f32) return false;
    return g.a_dtype != DType::bf16 || info.bf16_compute;
  }
  // FP8 (sm_89+): both operands fp8, not both e5m2; TN layout; K-major rows of 16-byte multiples; out bf16/f32.
  if (g.batch != 1) return false;  // no batched FP8 caller; its scale vectors would need per-product strides
  if (!info.fp8_compute || !dtype_is_fp8(g.a_dtype) || !dtype_is_fp8(g.b_dtype)) return false;
  if (g.a_dtype == DType::e5m2 && g.b_dtype == DType::e5m2) return false;
  if (g.trans_a || !g.trans_b || g.K % 16 != 0) return false;
  if (g.c_dtype != DType::bf16 && g.c_dtype != DType::f32) return false;
  if ((g.N * int64_t(dtype_size(g.c_dtype))) % 16 != 0) return false;
  if (alignment(g.a) < 16 || alignment(g.b) < 16 || alignment(g.c) < 16) return false;
  return g.scale_a && g.scale_b;
}

// ANVIL_BLASLT_TUNE (blaslt_tune.h): which products are timed over the heuristic's candidates at their first use
// (tune); by default those of at most kTuneMaxRows activation rows (decode steps and small batches, where the
// weight is read once and its stream sets the time). Training shapes stay on the heuristic by default: tuning picks
// by time, and an algorithm taken in one process but not the next would round differently between runs.
constexpr int64_t kTuneMaxRows = 64;
const BlasltTune& tune_knob() {
  static const BlasltTune k = parse_blaslt_tune(std::getenv("ANVIL_BLASLT_TUNE"));
  return k;
}

// The mean µs of `reps` launches of one candidate on the real operands into a scratch c, each after the L2 is
// overwritten (flush): in a decode step a projection's weight is never in L2 when its product runs, while 8B's
// q|k|v in FP8 (25 MB) would be served from the 50 MB L2 if timed back to back. Negative: the candidate failed.
double time_candidate(cublasLtHandle_t h, const Plan& p, const cublasLtMatmulAlgo_t& algo, const VendorGemm& g,
                      void* c, void* ws, void* flush, size_t flush_bytes, int reps) {
  cudaEvent_t t0, t1;
  ANVIL_GPU_CHECK(cudaEventCreate(&t0));
  ANVIL_GPU_CHECK(cudaEventCreate(&t1));
  double total = 0;
  for (int r = -1; r < reps && total >= 0; r++) {  // r = -1: warm-up (the kernel's module loads on first use)
    if (flush) ANVIL_GPU_CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream()));
    ANVIL_GPU_CHECK(cudaEventRecord(t0, stream()));
    const cublasStatus_t s = cublasLtMatmul(h, p.desc, &g.alpha, g.b, p.la, g.a, p.lb, &g.beta, c, p.lc, c, p.lc,
                                            &algo, ws, kWorkspaceBytes, stream());
    ANVIL_GPU_CHECK(cudaEventRecord(t1, stream()));
    ANVIL_GPU_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    ANVIL_GPU_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    if (s != CUBLAS_STATUS_SUCCESS) total = -1;
    else if (r >= 0) total += ms * 1e3;
  }
  ANVIL_GPU_CHECK(cudaEventDestroy(t0));
  ANVIL_GPU_CHECK(cudaEventDestroy(t1));
  return total < 0 ? -1 : total / reps;
}

// Sets p.algo to the fastest candidate, once per plan, for the products tune_knob() selects; not while the stream
// is being captured (timing needs the host to wait), so a captured step uses the heuristic's answer unless an eager
// call of the same shape came first (the decode step's first run is eager). A candidate is taken only if it beats
// the heuristic's first answer by kTuneMargin: near-ties then keep the same algorithm from one process to the next.
constexpr double kTuneMargin = 0.03;
constexpr int kTuneReps = 5;
void maybe_tune(cublasLtHandle_t h, Plan& p, const VendorGemm& g, void* ws) {
  const BlasltTune& k = tune_knob();
  if (p.candidates.size() < 2 || g.batch != 1 || !(k.all || (k.skinny_only && g.M <= kTuneMaxRows))) {
    p.tuned = true;
    return;
  }
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  ANVIL_GPU_CHECK(cudaStreamIsCapturing(stream(), &cap));
  if (cap != cudaStreamCaptureStatusNone) return;
  int l2 = 0;
  ANVIL_GPU_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, current_device()));
  const size_t flush_bytes = size_t(l2) * 2;
  // Tuning is an optimisation: with no room for its ~100 MB of scratch the product keeps the heuristic's answer
  // rather than failing the caller.
  void* flush = nullptr;
  void* c = nullptr;
  try {
    flush = alloc(flush_bytes);
    c = alloc(size_t(g.M) * size_t(g.N) * dtype_size(g.c_dtype));
  } catch (const Error&) {
    if (flush) free(flush);
    p.tuned = true;
    return;
  }
  std::vector<double> us;
  for (const cublasLtMatmulAlgo_t& a : p.candidates)
    us.push_back(time_candidate(h, p, a, g, c, ws, flush, flush_bytes, kTuneReps));
  ANVIL_GPU_CHECK(cudaStreamSynchronize(stream()));
  free(c);
  free(flush);
  size_t best = 0;
  for (size_t i = 1; i < us.size(); i++)
    if (us[i] >= 0 && (us[best] < 0 || us[i] < us[best])) best = i;
  if (us[0] >= 0 && us[best] > us[0] * (1 - kTuneMargin)) best = 0;
  p.algo = p.candidates[best];
  p.tuned = true;
  if (k.log) {
    std::string times;
    for (double t : us) times += str(" ", t < 0 ? std::string("failed") : str(int64_t(t * 100) / 100.0));
    std::fprintf(stderr, "cuBLASLt tuned M=%lld N=%lld K=%lld %s x %s -> %s: #%zu of %zu, us:%s\n",
                 static_cast<long long>(g.M), static_cast<long long>(g.N), static_cast<long long>(g.K),
                 dtype_name(g.a_dtype), dtype_name(g.b_dtype), dtype_name(g.c_dtype), best, us.size(), times.c_str());
  }
}

}  // namespace

bool vendor_gemm(const VendorGemm& g) {
  const int dev = current_device();
  const DeviceInfo info = device_info(dev);
  const bool fp8 = dtype_is_fp8(g.a_dtype) || dtype_is_fp8(g.b_dtype);
  if (!supported(g, info, fp8)) return false;

  // cuBLASLt's A is our b: it takes w's scale; its B (our a) takes a's scale. A vector on either side needs
  // outer-vector scaling, which scales both operands by vectors: a one-value scale there is broadcast first.
  const ScaleMode mode = !fp8                               ? ScaleMode::none
                         : g.per_channel_b || g.per_row_a ? ScaleMode::channel
                                                            : ScaleMode::tensor;
  const void* scale_A = g.scale_b;
  const void* scale_B = g.scale_a;
  Tensor a_scale_vec, b_scale_vec;
  auto broadcast = [&](Tensor& vec, const float* scalar, int64_t n) {
    vec = Tensor::empty({n}, DType::f32, Device::gpu(dev));
    broadcast_scalar_kernel<<<ceil_div(n, 256), 256, 0, stream()>>>(vec.data<float>(), scalar, int(n));
    ANVIL_LAUNCH_CHECK();
    return vec.data_ptr();
  };
  if (mode == ScaleMode::channel && !g.per_row_a) scale_B = broadcast(a_scale_vec, g.scale_a, g.M);
  if (mode == ScaleMode::channel && !g.per_channel_b) scale_A = broadcast(b_scale_vec, g.scale_b, g.N);

  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto hit = st.handles.find(dev);
  if (hit == st.handles.end()) {
    cublasLtHandle_t h;
    ANVIL_BLASLT_CHECK(cublasLtCreate(&h));
    hit = st.handles.emplace(dev, h).first;
  }
  const cublasLtHandle_t h = hit->second;
  const int64_t batch = g.batch;
  const int64_t sa = batch > 1 ? g.stride_a : 0, sb = batch > 1 ? g.stride_b : 0, sc = batch > 1 ? g.stride_c : 0;
  const Key key{dev,
                g.M,
                g.N,
                g.K,
                g.a_dtype,
                g.b_dtype,
                g.c_dtype,
                g.trans_a,
                g.trans_b,
                mode,
                alignment(g.a, sa * int64_t(dtype_size(g.a_dtype))),
                alignment(g.b, sb * int64_t(dtype_size(g.b_dtype))),
                alignment(g.c, sc * int64_t(dtype_size(g.c_dtype))),
                batch,
                sa,
                sb,
                sc};
  auto it = st.plans.find(key);
  if (it == st.plans.end()) it = st.plans.emplace(key, make_plan(h, key, scale_A, scale_B)).first;
  Plan& p = it->second;
  if (!p.ok) return false;
  if (mode != ScaleMode::none) set_scales(p, scale_A, scale_B);

  void*& ws = st.workspaces[{dev, current_stream()}];
  if (!ws) ws = alloc(kWorkspaceBytes);
  if (!p.tuned) maybe_tune(h, p, g, ws);
  ANVIL_BLASLT_CHECK(cublasLtMatmul(h, p.desc, &g.alpha, g.b, p.la, g.a, p.lb, &g.beta, g.c, p.lc, g.c, p.lc, &p.algo,
                                    ws, kWorkspaceBytes, stream()));
  return true;
}

}  // namespace anvil::gpu
#endif  // ANVIL_CUDA
