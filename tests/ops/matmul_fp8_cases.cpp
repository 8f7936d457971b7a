// matmul_fp8 cases: out (M, N) = (a_scale * a) @ (w_scale * w)^T with fp8 (or bf16: weight-only) a and fp8 w,
// per-tensor and per-channel weight scales, one activation scale or one per row, bf16/f32 out. The inputs are drawn
// already rounded to their fp8 dtype, so the reference sees exactly the kernel's values: only the fp32 accumulation
// and the output rounding err, and the tolerance is derived_tol(out dtype, K, 2) like any product (with the
// accumulator precision of native FP8 tensor cores on GPUs that have them).
#include <algorithm>
#include <vector>

#include "harness.h"
#include "kernels/matmul/matmul.h"

namespace anvil::test {
namespace {

struct F8 { int64_t M, N, K; DType a, w; bool per_channel; DType out; bool per_row = false; };

std::string f8_id(const F8& s) {
  return str("matmul_fp8(", dtype_name(s.a), "x", dtype_name(s.w), "->", dtype_name(s.out), ",M=", s.M, ",N=", s.N,
             ",K=", s.K, s.per_channel ? ",per_channel" : ",per_tensor", s.per_row ? ",per_row" : "", ")");
}

std::vector<Check> run_fp8(const Ctx& ctx, const F8& s) {
  // Spread of about 2^7 around 1: exercises e4m3's normal range and a few subnormals.
  auto a = rand_normal(size_t(s.M * s.K), ctx.seed, 1, 4.f, s.a);
  auto w = rand_normal(size_t(s.N * s.K), ctx.seed, 2, 4.f, s.w);
  // Per row: scales a factor of ~30 apart, as per-token quantisation of rows of different magnitudes makes them.
  const auto a_scale = s.per_row ? rand_uniform(size_t(s.M), ctx.seed, 4, 2e-3f, 6e-2f, DType::f32)
                                 : std::vector<float>{0.0371f};
  auto w_scale = s.per_channel ? rand_uniform(size_t(s.N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32)
                               : std::vector<float>{0.0053f};
  Tensor ta = make(a, {s.M, s.K}, s.a, ctx.device), tw = make(w, {s.N, s.K}, s.w, ctx.device);
  Tensor tsa = make(a_scale, {int64_t(a_scale.size())}, DType::f32, ctx.device);
  Tensor tsw = make(w_scale, {int64_t(w_scale.size())}, DType::f32, ctx.device);
  Tensor out = Tensor::empty({s.M, s.N}, s.out, ctx.device);
  matmul_fp8(ta, tsa, tw, tsw, out);
  std::vector<double> ref(size_t(s.M * s.N));
  matmul_fp8_ref(to_double(a).data(), to_double(a_scale).data(), s.per_row, to_double(w).data(),
                 to_double(w_scale).data(), s.per_channel, ref.data(), s.M, s.N, s.K);
  // Native FP8 tensor cores (sm_89+, gfx94x) do not accumulate in full fp32: Hopper's FP8 MMA keeps about 14
  // mantissa bits in its accumulator before each promotion to fp32 (on the H200 an f32-out 64x96x256 product
  // erred by 2^-14 relative, 236x the fp32 bound). Where the device has FP8 arithmetic, the accumulation term is
  // that of a 2^-14 unit roundoff: derived_tol's u(f16) = 2^-11 over-covers it, so use bf16-free reasoning:
  // factor * (u(out) + sqrt(K) * 2^-14).
  double tol = derived_tol(s.out, double(s.K), 2);
  if (ctx.device.is_gpu() && backend(ctx.device).info().fp8_compute && s.a != DType::bf16)
    tol = 2 * (dtype_unit_roundoff(s.out) + std::sqrt(double(s.K)) * 0x1p-14);
  return {compare("out", out, ref, tol)};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct MNK { int64_t M, N, K; };
  // K % 16 == 0 and N % 8 == 0 meet cuBLASLt's FP8 layout rules (the NVIDIA native path); (7, 33, 40) and
  // (3, 5, 7) do not and take the tiled kernel on every GPU.
  const MNK shapes[] = {{1, 16, 32}, {7, 33, 40}, {3, 5, 7}, {64, 96, 256}, {130, 264, 512}};
  for (MNK m : shapes)
    for (bool pc : {false, true})
      for (DType o : {DType::bf16, DType::f32}) {
        F8 s{m.M, m.N, m.K, DType::e4m3fn, DType::e4m3fn, pc, o};
        OpCase c{"matmul", f8_id(s)};
        c.test = [=](const Ctx& ctx) { return run_fp8(ctx, s); };
        out.push_back(c);
      }
  // One scale per row (dynamic per-token quantisation): the vendor GEMM's outer-vector scales with per-channel and
  // per-tensor (broadcast) weight scales, and the tiled kernel ((7, 33, 40) and the fnuz formats on NVIDIA).
  for (F8 s : {F8{64, 96, 256, DType::e4m3fn, DType::e4m3fn, true, DType::bf16, true},
               F8{64, 96, 256, DType::e4m3fn, DType::e4m3fn, false, DType::f32, true},
               F8{130, 264, 512, DType::e4m3fn, DType::e4m3fn, true, DType::f32, true},
               F8{32, 128, 1024, DType::e4m3fn, DType::e4m3fn, true, DType::bf16, true},
               F8{7, 33, 40, DType::e4m3fn, DType::e4m3fn, true, DType::bf16, true},
               F8{17, 40, 48, DType::e4m3fnuz, DType::e4m3fnuz, false, DType::bf16, true}}) {
    OpCase c{"matmul", f8_id(s)};
    c.test = [=](const Ctx& ctx) { return run_fp8(ctx, s); };
    out.push_back(c);
  }
  // e5m2 activations (gradients' format), weight-only FP8 (bf16 activations), and AMD's fnuz formats.
  for (F8 s : {F8{33, 48, 64, DType::e5m2, DType::e4m3fn, true, DType::bf16},
               F8{16, 80, 96, DType::bf16, DType::e4m3fn, true, DType::bf16},
               F8{5, 33, 71, DType::bf16, DType::e4m3fn, false, DType::f32},
               F8{17, 40, 48, DType::e4m3fnuz, DType::e4m3fnuz, true, DType::bf16},
               F8{9, 24, 32, DType::e5m2fnuz, DType::e4m3fnuz, false, DType::f32}}) {
    OpCase c{"matmul", f8_id(s)};
    c.test = [=](const Ctx& ctx) { return run_fp8(ctx, s); };
    out.push_back(c);
  }
  // Perf: FP8 e4m3 with per-channel weight scales (serving), square and Llama-8B decode projections. Both operands
  // are FP8, so on a GPU with FP8 arithmetic this times the vendor's native FP8 GEMM; the weight-only skinny kernel
  // that FP8 decode uses at 1-16 rows is timed by skinny_gemm_perf(e4m3fn, ...).
  auto perf_case = [&](std::string id, int64_t M, int64_t N, int64_t K, bool weight_bytes) {
    OpCase c{"matmul", std::move(id)};
    c.perf = [=](const Ctx& ctx) {
      const DType f8 = DType::e4m3fn;
      Tensor a = make(rand_normal(size_t(M * K), ctx.seed, 1, 4.f, f8), {M, K}, f8, ctx.device);
      Tensor w = make(rand_normal(size_t(N * K), ctx.seed, 2, 4.f, f8), {N, K}, f8, ctx.device);
      Tensor sa = make({0.03f}, {1}, DType::f32, ctx.device);
      Tensor sw = make(rand_uniform(size_t(N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32), {N}, DType::f32, ctx.device);
      Tensor y = Tensor::empty({M, N}, DType::bf16, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { matmul_fp8(a, sa, w, sw, y); });
      r.flops = 2.0 * double(M) * double(N) * double(K);
      r.bytes = weight_bytes ? double(N * K) : double(M * K + N * K + 2 * M * N);
      if (weight_bytes && ctx.device.is_gpu()) {
        // As a batch decode step runs it: back to back in a graph, each launch on its own weight copy (>= 256 MB
        // in all, so none is still in the 50 MB L2 when its turn comes round).
        const int count = int(std::max<int64_t>(4, (int64_t(256) << 20) / (N * K) + 1));
        std::vector<Tensor> ws{w}, ys{y};
        for (int i = 1; i < count; i++) {
          ws.push_back(w.clone());
          ys.push_back(Tensor::empty({M, N}, DType::bf16, ctx.device));
        }
        r.graph_us = time_us_graph(ctx, count, [&](int i) { matmul_fp8(a, sa, ws[size_t(i)], sw, ys[size_t(i)]); });
      }
      return r;
    };
    out.push_back(c);
  };
  perf_case("matmul_fp8_perf(e4m3fn,M=8192,N=8192,K=8192,per_channel)", 8192, 8192, 8192, false);
  struct NK { int64_t N, K; const char* name; };
  for (NK nk : {NK{4096, 4096, "o"}, NK{6144, 4096, "qkv"}, NK{28672, 4096, "gate_up"}, NK{4096, 14336, "down"}})
    for (int64_t M : {1, 16, 32, 64})
      perf_case(str("matmul_fp8_perf(e4m3fn,llama8b_", nk.name, ",M=", M, ",N=", nk.N, ",K=", nk.K, ")"), M, nk.N,
                nk.K, true);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
