#include "fp8_check.h"
#include "harness.h"
#include "kernels/swiglu/swiglu.h"

namespace anvil::test {
namespace {

// The f32 kernel rounds ~8 times on the way to one output (exp, add, divide, three multiplies, ...), an
// error that grows like a short sum's, so the tolerances use k_len = 8 (no reduction is involved).
constexpr double kChain = 8;

// n values ~ N(0, stddev): a 1M-value seeded block tiled, so perf inputs of 235M elements take no time.
std::vector<float> tiled_normal(size_t n, uint64_t seed, uint64_t salt, float stddev, DType dt) {
  const size_t block = std::min<size_t>(n, size_t(1) << 20);
  auto b = rand_normal(block, seed, salt, stddev, dt);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = b[i % block];
  return v;
}

std::string id_of(const char* what, DType dt, DType ot, int64_t N, int64_t H) {
  std::string types = ot == dt ? dtype_name(dt) : str(dtype_name(dt), "->", dtype_name(ot));
  return str(what, "(", types, ",[", N, ",2x", H, "])");
}

PerfResult perf_fwd(const Ctx& ctx, DType dt, DType ot, int64_t N, int64_t H) {
  Tensor gu = make(tiled_normal(size_t(N * 2 * H), ctx.seed, 1, 1.f, dt), {N, 2 * H}, dt, ctx.device);
  Tensor out = Tensor::empty({N, H}, ot, ctx.device);
  Tensor scale = dtype_is_fp8(ot) ? make({0.05f}, {1}, DType::f32, ctx.device) : Tensor();
  PerfResult r;
  r.us = time_us(ctx, [&] { swiglu_fwd(gu, out, scale); });
  r.bytes = double(N * H) * (2 * dtype_size(dt) + dtype_size(ot));
  if (N == 1 && ctx.device.is_gpu()) {
    // One decode token: 64 launches back to back in a graph, each on its own input and output.
    constexpr int kCount = 64;
    std::vector<Tensor> gus, outs;
    for (int i = 0; i < kCount; i++) gus.push_back(gu.clone()), outs.push_back(Tensor::empty({N, H}, ot, ctx.device));
    r.graph_us = time_us_graph(ctx, kCount, [&](int i) { swiglu_fwd(gus[size_t(i)], outs[size_t(i)], scale); });
  }
  return r;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct S { int64_t N, H; };
  // H = 7, 100, 1001 take the scalar path; 1000 and 4096 the 16-byte one (for f32, 100 too).
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (DType ot : {dt, DType::e4m3fn, DType::e4m3fnuz})
      for (S s : {S{1, 7}, S{3, 100}, S{5, 1000}, S{2, 1001}, S{64, 4096}}) {
        const bool fp8 = dtype_is_fp8(ot);
        if (fp8 && s.N * s.H < 1000) continue;
        OpCase c{"swiglu", id_of("swiglu", dt, ot, s.N, s.H)};
        // FP8: inputs ~N(0, 2) and scale 0.05 put the largest outputs past 240 / 448: saturation is tested.
        const float sd = fp8 ? 2.f : 1.f, scale = 0.05f;
        c.test = [=](const Ctx& ctx) {
          auto gu = rand_normal(size_t(s.N * 2 * s.H), ctx.seed, 1, sd, dt);
          auto dout = rand_normal(size_t(s.N * s.H), ctx.seed, 2, 1.f, dt);
          Tensor tgu = make(gu, {s.N, 2 * s.H}, dt, ctx.device), tout = Tensor::empty({s.N, s.H}, ot, ctx.device);
          swiglu_fwd(tgu, tout, fp8 ? make({scale}, {1}, DType::f32, ctx.device) : Tensor());
          std::vector<double> rout(static_cast<size_t>(s.N * s.H));
          swiglu_fwd_ref(to_double(gu).data(), rout.data(), s.N, s.H);
          if (fp8) {
            for (double& v : rout) v /= scale;
            return std::vector<Check>{compare_fp8("out", tout, rout)};
          }
          Tensor tdout = make(dout, {s.N, s.H}, dt, ctx.device), tdgu = Tensor::empty({s.N, 2 * s.H}, dt, ctx.device);
          swiglu_bwd(tdout, tgu, tdgu);
          std::vector<double> rdgu(gu.size());
          swiglu_bwd_ref(to_double(dout).data(), to_double(gu).data(), rdgu.data(), s.N, s.H);
          swiglu_bwd(tdout, tgu, tgu);  // in place: dgu = gu
          return std::vector<Check>{compare("out", tout, rout, derived_tol(dt, kChain, 2)),
                                    compare("dgu", tdgu, rdgu, derived_tol(dt, kChain, 3)),
                                    compare("dgu (in place)", tgu, rdgu, derived_tol(dt, kChain, 3))};
        };
        if (!fp8 && dt == DType::f32 && s.N * s.H <= 1000) {
          c.grad = [=](const Ctx& ctx) {
            auto gu = to_double(rand_normal(size_t(s.N * 2 * s.H), ctx.seed, 1, 2.f, DType::f32));
            auto g = to_double(rand_normal(size_t(s.N * s.H), ctx.seed, 2, 1.f, DType::f32));
            auto f = [&](const std::vector<double>& x) {
              std::vector<double> o(static_cast<size_t>(s.N * s.H));
              swiglu_fwd_ref(x.data(), o.data(), s.N, s.H);
              return o;
            };
            std::vector<double> dgu(gu.size());
            swiglu_bwd_ref(g.data(), gu.data(), dgu.data(), s.N, s.H);
            // Central differences in fp64 with h=1e-6 err by ~1e-9 relative; 1e-6 is a safe bound.
            return std::vector<Check>{compare("dgu vs finite differences", std::vector<float>(dgu.begin(), dgu.end()),
                                              finite_diff(f, gu, g), 1e-6)};
          };
        }
        out.push_back(c);
      }

  // Perf: Llama-3-8B's MLP (H = 14336) on a training batch of 8192 tokens, and one decode token.
  const int64_t H = 14336;
  for (int64_t N : {int64_t(8192), int64_t(1)})
    for (DType ot : {DType::bf16, DType::e4m3fn}) {
      OpCase c{"swiglu", id_of("swiglu", DType::bf16, ot, N, H)};
      c.perf = [=](const Ctx& ctx) { return perf_fwd(ctx, DType::bf16, ot, N, H); };
      out.push_back(c);
    }
  OpCase b{"swiglu", id_of("swiglu_bwd", DType::bf16, DType::bf16, 8192, H)};
  b.perf = [=](const Ctx& ctx) {
    const int64_t N = 8192;
    const DType dt = DType::bf16;
    Tensor gu = make(tiled_normal(size_t(N * 2 * H), ctx.seed, 1, 1.f, dt), {N, 2 * H}, dt, ctx.device);
    Tensor dout = make(tiled_normal(size_t(N * H), ctx.seed, 2, 1.f, dt), {N, H}, dt, ctx.device);
    Tensor dgu = Tensor::empty({N, 2 * H}, dt, ctx.device);
    PerfResult r;
    r.us = time_us(ctx, [&] { swiglu_bwd(dout, gu, dgu); });
    r.bytes = double(N * H) * 5 * dtype_size(dt);  // dout, gate, up read; dgate, dup written
    return r;
  };
  out.push_back(b);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
