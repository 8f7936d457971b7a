// skinny_gemm cases: y (M, N) = x (M, K) @ (w_scale * w)^T for decode row counts M in {1, 2, 4, 7, 16}, every
// weight dtype (bf16, f16, e4m3fn, e4m3fnuz), activations and outputs in f32/bf16/f16, per-tensor and per-channel
// scales. The weights are drawn already rounded to their dtype (fp8 codes included), so the reference sees exactly
// the kernel's values: only the fp32 accumulation and the output rounding err, and the tolerance is
// derived_tol(y dtype, K, 2) as for any product. Perf: the Llama-3.1-8B projections (stacked qkv and gate_up).
#include <functional>

#include "harness.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil::test {
namespace {

enum class Scale { none, per_tensor, per_channel };
const char* scale_name(Scale s) { return s == Scale::none ? "" : s == Scale::per_tensor ? ",per_tensor" : ",per_channel"; }

struct SG {
  int64_t M, N, K;
  DType x, w, y;
  Scale scale;
};

std::string sg_id(const SG& s) {
  return str("skinny_gemm(", dtype_name(s.x), "x", dtype_name(s.w), "->", dtype_name(s.y), ",M=", s.M, ",N=", s.N,
             ",K=", s.K, scale_name(s.scale), ")");
}

std::vector<Check> run_sg(const Ctx& ctx, const SG& s) {
  auto x = rand_normal(size_t(s.M * s.K), ctx.seed, 1, 1.f, s.x);
  // fp8 weights with a spread of about 2^7 around 1 (e4m3 normals and a few subnormals), scaled back by w_scale.
  auto w = rand_normal(size_t(s.N * s.K), ctx.seed, 2, dtype_is_fp8(s.w) ? 4.f : 1.f, s.w);
  std::vector<float> ws;
  if (s.scale == Scale::per_tensor) ws = {0.0053f};
  if (s.scale == Scale::per_channel) ws = rand_uniform(size_t(s.N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32);
  Tensor tx = make(x, {s.M, s.K}, s.x, ctx.device), tw = make(w, {s.N, s.K}, s.w, ctx.device);
  Tensor tws = ws.empty() ? Tensor() : make(ws, {int64_t(ws.size())}, DType::f32, ctx.device);
  // Filled with garbage-like values: the kernel must overwrite every element.
  Tensor ty = make(rand_normal(size_t(s.M * s.N), ctx.seed, 4, 1e3f, s.y), {s.M, s.N}, s.y, ctx.device);
  skinny_gemm(tx, tw, tws, ty);
  std::vector<double> ref(size_t(s.M * s.N)), wsd = to_double(ws);
  skinny_gemm_ref(to_double(x).data(), to_double(w).data(), ws.empty() ? nullptr : wsd.data(),
                  s.scale == Scale::per_channel, ref.data(), s.M, s.N, s.K);
  return {compare("y", ty, ref, derived_tol(s.y, double(s.K), 2))};
}

// Bad arguments: each must throw anvil::Error naming the problem.
Check expect_error(const std::string& what, const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    const bool ok = std::string(e.what()).find(needle) != std::string::npos;
    return {ok, str(what, ": ", e.what(), ok ? "" : str(" (expected to mention '", needle, "')"))};
  } catch (const std::exception& e) {
    return {false, str(what, ": not an anvil::Error: ", e.what())};
  }
  return {false, str(what, ": no error")};
}

OpCase error_case() {
  OpCase c{"skinny_gemm", "skinny_gemm(errors)"};
  c.test = [](const Ctx& ctx) {
    auto T = [&](Shape s, DType dt) { return Tensor::zeros(s, dt, ctx.device); };
    Tensor x = T({4, 32}, DType::bf16), w = T({16, 32}, DType::bf16), y = T({4, 16}, DType::bf16), none;
    Tensor w8 = T({16, 32}, DType::e4m3fn), s1 = T({1}, DType::f32);
    std::vector<Check> r;
    r.push_back(expect_error("17 rows", [&] {
      Tensor x17 = T({17, 32}, DType::bf16), y17 = T({17, 16}, DType::bf16);
      skinny_gemm(x17, w, none, y17);
    }, "M <= 16"));
    r.push_back(expect_error("K mismatch", [&] { Tensor w2 = T({16, 31}, DType::bf16); skinny_gemm(x, w2, none, y); },
                             "w (N, K) with K = 32"));
    r.push_back(expect_error("fp8 without scale", [&] { skinny_gemm(x, w8, none, y); }, "w_scale"));
    r.push_back(expect_error("w_scale shape", [&] {
      Tensor s15 = T({15}, DType::f32);
      skinny_gemm(x, w8, s15, y);
    }, "w_scale of shape [1] or [16]"));
    r.push_back(expect_error("e5m2 weights", [&] {
      Tensor w5 = T({16, 32}, DType::e5m2);
      skinny_gemm(x, w5, s1, y);
    }, "w of dtype"));
    r.push_back(expect_error("y shape", [&] { Tensor y2 = T({4, 15}, DType::bf16); skinny_gemm(x, w, none, y2); },
                             "y of shape [4,16]"));
    r.push_back(expect_error("y aliases x", [&] {
      Tensor xs = T({4, 16}, DType::bf16), ws = T({16, 16}, DType::bf16);
      skinny_gemm(xs, ws, none, xs);
    }, "overlap"));
    r.push_back(expect_error("non-contiguous w", [&] {
      Tensor wt = T({32, 16}, DType::bf16).transpose(0, 1);
      skinny_gemm(x, wt, none, y);
    }, "contiguous"));
    return r;
  };
  return c;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct NK { int64_t N, K; };
  // Odd N and K (tails of the 16-byte pack and of the column groups; K=71 and, for fp8, K=1000 take the byte-load
  // path), a small aligned shape, a small-N/long-K shape that makes the GPU split K (3 column blocks), and the
  // Llama-8B projections scaled down by 16: qkv (6144, 4096), down (4096, 14336), gate_up (28672, 4096).
  const NK shapes[] = {{33, 71}, {96, 256}, {257, 1000}, {40, 4096}, {384, 256}, {256, 896}, {1792, 256}};
  const DType floats[] = {DType::bf16, DType::f32, DType::f16};
  int i = 0;
  for (DType w : {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz})
    for (NK nk : shapes)
      for (int64_t M : {1, 2, 4, 7, 16}) {
        // Activation and output dtypes and the scale kind rotate over the cases (every pair appears).
        const DType x = floats[i % 3], y = floats[(i / 3) % 3];
        Scale sc = dtype_is_fp8(w) ? (i % 2 ? Scale::per_channel : Scale::per_tensor)
                                   : (i % 4 == 3 ? Scale::per_channel : Scale::none);
        i++;
        SG s{M, nk.N, nk.K, x, w, y, sc};
        OpCase c{"skinny_gemm", sg_id(s)};
        c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
        out.push_back(c);
      }
  // K longer than one staged x chunk (3072 k at 4 rows, 1536 at 8) without a K split on a 132-SM GPU: the
  // kernel restages x inside one block.
  for (DType w : {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz})
    for (int64_t M : {4, 7}) {
      SG s{M, 3200, 3520, DType::bf16, w, DType::bf16, dtype_is_fp8(w) ? Scale::per_channel : Scale::none};
      OpCase c{"skinny_gemm", sg_id(s)};
      c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
      out.push_back(c);
    }
  out.push_back(error_case());

  // Perf: Llama-3.1-8B decode projections, bf16 activations and outputs; bytes = weights + x + y (the weight
  // stream is the floor; the lead compares GB/s to the copy ceiling).
  struct P { int64_t N, K; const char* name; };
  for (DType wd : {DType::bf16, DType::e4m3fn})
    for (P pr : {P{6144, 4096, "qkv"}, P{4096, 4096, "o"}, P{28672, 4096, "gate_up"}, P{4096, 14336, "down"}})
      for (int64_t M : {1, 4, 16}) {
        OpCase c{"skinny_gemm", str("skinny_gemm_perf(", dtype_name(wd), ",llama8b_", pr.name, ",M=", M, ",N=", pr.N,
                                    ",K=", pr.K, ")")};
        c.perf = [=](const Ctx& ctx) {
          const int64_t N = pr.N, K = pr.K;
          Tensor x = make(rand_normal(size_t(M * K), ctx.seed, 1, 1.f, DType::bf16), {M, K}, DType::bf16, ctx.device);
          Tensor w = make(rand_normal(size_t(N * K), ctx.seed, 2, dtype_is_fp8(wd) ? 4.f : 0.02f, wd), {N, K}, wd,
                          ctx.device);
          Tensor ws = dtype_is_fp8(wd) ? make(rand_uniform(size_t(N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32), {N},
                                              DType::f32, ctx.device)
                                       : Tensor();
          Tensor y = Tensor::empty({M, N}, DType::bf16, ctx.device);
          PerfResult r;
          r.us = time_us(ctx, [&] { skinny_gemm(x, w, ws, y); });
          r.flops = 2.0 * double(M) * double(N) * double(K);
          r.bytes = double(N * K) * double(dtype_size(wd)) + 2.0 * double(M * K) + 2.0 * double(M * N);
          return r;
        };
        out.push_back(c);
      }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
