#include "harness.h"
#include "kernels/causal_conv1d/causal_conv1d.h"

namespace anvil::test {
namespace {

struct S { int64_t B, D, L, W; bool bias, silu; };

std::string conv_id(const char* name, DType dt, const S& s) {
  return str(name, "(", dtype_name(dt), ",", shape_str({s.B, s.D, s.L}), ",W=", s.W, s.bias ? ",bias" : "",
             s.silu ? ",silu" : "", ")");
}

// Seeded inputs of one case, rounded to the dtype the kernel sees.
struct Inputs {
  std::vector<float> x, w, bias, dout;
};
Inputs inputs(const S& s, DType dt, uint64_t seed) {
  const size_t n = size_t(s.B * s.D * s.L);
  Inputs in;
  in.x = rand_normal(n, seed, 1, 1.f, dt);
  in.w = rand_uniform(size_t(s.D * s.W), seed, 2, -0.6f, 0.6f, DType::f32);
  in.bias = rand_uniform(size_t(s.D), seed, 3, -0.5f, 0.5f, DType::f32);
  in.dout = rand_normal(n, seed, 4, 1.f, dt);
  return in;
}

// dbl: dx is a (D, B, L) buffer seen as (B, D, L), as the Mamba backward passes it.
std::vector<Check> test_case(const Ctx& ctx, DType dt, const S& s, bool dbl = false) {
  Inputs in = inputs(s, dt, ctx.seed);
  const Shape xs{s.B, s.D, s.L};
  Tensor tx = make(in.x, xs, dt, ctx.device), tw = make(in.w, {s.D, s.W}, DType::f32, ctx.device);
  Tensor tb = s.bias ? make(in.bias, {s.D}, DType::f32, ctx.device) : Tensor();
  Tensor tout = Tensor::empty(xs, dt, ctx.device);
  causal_conv1d_fwd(tx, tw, tb, s.silu, tout);
  auto x = to_double(in.x), w = to_double(in.w), b = to_double(in.bias), g = to_double(in.dout);
  std::vector<double> rout(x.size());
  causal_conv1d_fwd_ref(x.data(), w.data(), s.bias ? b.data() : nullptr, s.silu, rout.data(), s.B, s.D, s.L, s.W);

  // Backward; dw/dbias accumulate, so start them non-zero.
  auto dw0 = rand_normal(size_t(s.D * s.W), ctx.seed, 5, 1.f, DType::f32);
  auto db0 = rand_normal(size_t(s.D), ctx.seed, 6, 1.f, DType::f32);
  Tensor tg = make(in.dout, xs, dt, ctx.device);
  Tensor tdx = dbl ? Tensor::empty({s.D, s.B, s.L}, dt, ctx.device).transpose(0, 1)
                   : Tensor::empty(xs, dt, ctx.device);
  Tensor tdw = make(dw0, {s.D, s.W}, DType::f32, ctx.device), tdb = make(db0, {s.D}, DType::f32, ctx.device);
  causal_conv1d_bwd(tg, tx, tw, tb, s.silu, tdx, tdw, tdb);
  std::vector<double> rdx(x.size()), rdw = to_double(dw0), rdb = to_double(db0);
  causal_conv1d_bwd_ref(g.data(), x.data(), w.data(), s.bias ? b.data() : nullptr, s.silu, rdx.data(), rdw.data(),
                        rdb.data(), s.B, s.D, s.L, s.W);
  const double k = double(s.B * s.L);  // dw, dbias sum over every (b, t)
  return {compare("out", tout, rout, derived_tol(dt, double(s.W), 2)),
          compare("dx", tdx, rdx, derived_tol(dt, double(s.W * s.W), 3)),
          compare("dw", tdw, rdw, derived_tol(DType::f32, k, 3)),
          compare("dbias", tdb, rdb, derived_tol(DType::f32, k, 3))};
}

// Finite differences of the reference forward for x, w and bias.
std::vector<Check> grad_case(const Ctx& ctx, const S& s) {
  Inputs in = inputs(s, DType::f32, ctx.seed);
  auto x = to_double(in.x), w = to_double(in.w), b = to_double(in.bias), g = to_double(in.dout);
  auto run = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
    std::vector<double> o(xx.size());
    causal_conv1d_fwd_ref(xx.data(), ww.data(), bb.data(), s.silu, o.data(), s.B, s.D, s.L, s.W);
    return o;
  };
  std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
  causal_conv1d_bwd_ref(g.data(), x.data(), w.data(), b.data(), s.silu, dx.data(), dw.data(), db.data(), s.B, s.D,
                        s.L, s.W);
  auto as_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  // fp64 central differences with h=1e-6 err by ~1e-9 relative; 1e-6 bounds that with margin.
  return {compare("dx vs finite differences", as_f(dx),
                  finite_diff([&](const std::vector<double>& v) { return run(v, w, b); }, x, g), 1e-6),
          compare("dw vs finite differences", as_f(dw),
                  finite_diff([&](const std::vector<double>& v) { return run(x, v, b); }, w, g), 1e-6),
          compare("dbias vs finite differences", as_f(db),
                  finite_diff([&](const std::vector<double>& v) { return run(x, w, v); }, b, g), 1e-6)};
}

// Three decode steps against the reference, then the rolled state.
std::vector<Check> update_case(const Ctx& ctx, DType dt, int64_t B, int64_t D, int64_t W, bool bias, bool silu) {
  auto st = rand_normal(size_t(B * D * (W - 1)), ctx.seed, 7, 1.f, dt);
  auto w = rand_uniform(size_t(D * W), ctx.seed, 2, -0.6f, 0.6f, DType::f32);
  auto b = rand_uniform(size_t(D), ctx.seed, 3, -0.5f, 0.5f, DType::f32);
  Tensor tst = make(st, {B, D, W - 1}, dt, ctx.device), tw = make(w, {D, W}, DType::f32, ctx.device);
  Tensor tb = bias ? make(b, {D}, DType::f32, ctx.device) : Tensor();
  auto rst = to_double(st), rw = to_double(w), rb = to_double(b);
  std::vector<Check> out;
  for (int step = 0; step < 3; step++) {
    auto x = rand_normal(size_t(B * D), ctx.seed, 8 + uint64_t(step), 1.f, dt);
    Tensor tx = make(x, {B, D}, dt, ctx.device), to = Tensor::empty({B, D}, dt, ctx.device);
    causal_conv1d_update(tx, tst, tw, tb, silu, to);
    std::vector<double> ro(x.size());
    causal_conv1d_update_ref(to_double(x).data(), rst.data(), rw.data(), bias ? rb.data() : nullptr, silu, ro.data(),
                             B, D, W);
    out.push_back(compare(str("out step ", step), to, ro, derived_tol(dt, double(W), 2)));
  }
  out.push_back(compare("conv_state", tst, rst, derived_tol(dt, 1, 2)));
  return out;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // Odd D and L: tails that are not multiples of the 16-byte pack (8 bf16) or of the 128-thread block.
  const S shapes[] = {{1, 1, 1, 4, true, true},    {2, 3, 7, 4, true, true},      {2, 5, 100, 3, false, true},
                      {1, 4, 1000, 2, true, false}, {2, 7, 257, 4, true, true},    {1, 3, 2048, 4, false, false},
                      {2, 6, 1031, 3, true, true},  {1, 2, 4096, 4, true, true},   {1, 2, 9, 2, false, false},
                      {2, 2, 11, 3, true, true},
                      // Enough rows (> 64 per SM) that the GPU backward's warp spans take whole rows of 2-3 chunks
                      // (32 packs each), the last one partial: L % 8 != 0 (bf16/f16 scalar path) and == 0.
                      {1, 9000, 300, 4, true, true}, {1, 9000, 264, 3, false, true}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (const S& s : shapes) {
      OpCase c{"causal_conv1d", conv_id("causal_conv1d", dt, s)};
      c.test = [=](const Ctx& ctx) { return test_case(ctx, dt, s); };
      if (dt == DType::f32 && s.B * s.D * s.L <= 600) c.grad = [=](const Ctx& ctx) { return grad_case(ctx, s); };
      out.push_back(c);
    }
  for (DType dt : {DType::f32, DType::bf16})
    for (const S& s : {S{2, 3, 7, 4, true, true}, S{3, 5, 1031, 3, true, true}, S{2, 9000, 264, 4, false, true}}) {
      OpCase c{"causal_conv1d", conv_id("causal_conv1d", dt, s) + " dx in (D, B, L) order"};
      c.test = [=](const Ctx& ctx) { return test_case(ctx, dt, s, /*dbl=*/true); };
      out.push_back(c);
    }
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t W : {2, 3, 4}) {
      const bool bias = W != 3, silu = W != 2;
      OpCase c{"causal_conv1d", str("causal_conv1d_update(", dtype_name(dt), ",[3,37],W=", W, bias ? ",bias" : "",
                                    silu ? ",silu" : "", ")")};
      c.test = [=](const Ctx& ctx) { return update_case(ctx, dt, 3, 37, W, bias, silu); };
      out.push_back(c);
    }
  {
    // dx in an order other than (B, D, L) or (D, B, L): its rows are not contiguous, so a clear error.
    OpCase c{"causal_conv1d", "causal_conv1d_bwd(f32,[2,3,8],W=4) rejects dx with strided rows"};
    c.test = [](const Ctx& ctx) {
      auto f = [&](const Shape& sh) { return Tensor::zeros(sh, DType::f32, ctx.device); };
      Tensor x = f({2, 3, 8}), g = f({2, 3, 8}), w = f({3, 4}), dw = f({3, 4});
      Tensor dx = f({2, 8, 3}).transpose(1, 2), no_bias;
      return std::vector<Check>{expect_error("dx with strided rows", "dx with rows in (B, D, L) order",
                                             [&] { causal_conv1d_bwd(g, x, w, no_bias, true, dx, dw, no_bias); })};
    };
    out.push_back(c);
  }
  {
    // An unsupported width is a clear error, never a crash.
    OpCase c{"causal_conv1d", "causal_conv1d_fwd(f32,[1,2,8],W=5) rejects W=5"};
    c.test = [](const Ctx& ctx) {
      Tensor x = make(rand_normal(16, ctx.seed, 1, 1.f, DType::f32), {1, 2, 8}, DType::f32, ctx.device);
      Tensor w = make(rand_normal(10, ctx.seed, 2, 1.f, DType::f32), {2, 5}, DType::f32, ctx.device);
      Tensor o = Tensor::empty({1, 2, 8}, DType::f32, ctx.device);
      Check ch;
      try {
        causal_conv1d_fwd(x, w, Tensor(), false, o);
        ch.ok = false;
        ch.detail = "no error for W=5";
      } catch (const Error& e) {
        ch.ok = std::string(e.what()).find("W in {2, 3, 4}") != std::string::npos;
        ch.detail = e.what();
      }
      return std::vector<Check>{ch};
    };
    out.push_back(c);
  }
  // Perf at the Mamba target shape: B=4, D=5120 (Mamba-2.8B's D_inner), L=2048, W=4, bias, SiLU.
  for (bool bwd : {false, true}) {
    const S s{4, 5120, 2048, 4, true, true};
    OpCase c{"causal_conv1d", conv_id(bwd ? "causal_conv1d_bwd" : "causal_conv1d_fwd", DType::bf16, s)};
    c.perf = [=](const Ctx& ctx) {
      const DType dt = DType::bf16;
      const Shape xs{s.B, s.D, s.L};
      const size_t n = size_t(s.B * s.D * s.L);
      Tensor tx = make(rand_normal(n, ctx.seed, 1, 1.f, dt), xs, dt, ctx.device);
      Tensor tw = make(rand_uniform(size_t(s.D * s.W), ctx.seed, 2, -0.6f, 0.6f, DType::f32), {s.D, s.W},
                       DType::f32, ctx.device);
      Tensor tb = make(rand_uniform(size_t(s.D), ctx.seed, 3, -0.5f, 0.5f, DType::f32), {s.D}, DType::f32,
                       ctx.device);
      Tensor to = Tensor::empty(xs, dt, ctx.device);
      PerfResult r;
      if (!bwd) {
        r.us = time_us(ctx, [&] { causal_conv1d_fwd(tx, tw, tb, true, to); });
        r.bytes = 2.0 * double(n) * dtype_size(dt);  // x in, out out
      } else {
        Tensor tg = make(rand_normal(n, ctx.seed, 4, 1.f, dt), xs, dt, ctx.device);
        Tensor tdw = Tensor::zeros({s.D, s.W}, DType::f32, ctx.device);
        Tensor tdb = Tensor::zeros({s.D}, DType::f32, ctx.device);
        r.us = time_us(ctx, [&] { causal_conv1d_bwd(tg, tx, tw, tb, true, to, tdw, tdb); });
        r.bytes = 3.0 * double(n) * dtype_size(dt);  // x, dout in, dx out
      }
      return r;
    };
    out.push_back(c);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
