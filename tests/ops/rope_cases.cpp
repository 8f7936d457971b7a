#include "harness.h"
#include "kernels/rope/rope.h"

namespace anvil::test {
namespace {

// The f32 kernel rounds ~4 times per output (the angle's sincosf, two products, one sum) besides the final
// rounding into the dtype: k_len = 4 (there is no reduction).
constexpr double kChain = 4;

// Positions in [-100, 20000): negative ones are legal, and 20000 * inv_freq[0] = 20000 rad exercises the
// sin/cos range reduction.
std::vector<int32_t> rand_pos(int64_t N, uint64_t seed) {
  auto u = rand_uniform(size_t(N), seed, 7, 0.f, 1.f, DType::f32);
  std::vector<int32_t> pos(static_cast<size_t>(N));
  for (size_t i = 0; i < pos.size(); i++) pos[i] = int32_t(u[i] * 20100.f) - 100;
  return pos;
}
Tensor make_i32(const std::vector<int32_t>& v, Device d) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t.to(d);
}
// Llama 3.1's frequencies for HD >= 64, plain theta = 1e4 below.
std::vector<float> freqs_for(int64_t HD) {
  RopeConfig cfg;
  if (HD >= 64) {
    cfg.theta = 500000;
    cfg.type = "llama3";
  }
  return rope_inv_freq(cfg, HD);
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct S { int64_t N, NH, HD; };
  // HD/2 = 1 and 5 are not multiples of any pack (scalar path); 32 and 64 are (16-byte path).
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (S s : {S{1, 1, 2}, S{3, 2, 10}, S{5, 3, 64}, S{7, 4, 128}, S{64, 8, 128}}) {
      OpCase c{"rope", str("rope(", dtype_name(dt), ",", shape_str({s.N, s.NH, s.HD}), ")")};
      const Shape shape = {s.N, s.NH, s.HD};
      const size_t n = size_t(s.N * s.NH * s.HD);
      c.test = [=](const Ctx& ctx) {
        auto x = rand_normal(n, ctx.seed, 1, 1.f, dt), dy = rand_normal(n, ctx.seed, 2, 1.f, dt);
        auto pos = rand_pos(s.N, ctx.seed);
        auto inv = freqs_for(s.HD);
        Tensor tx = make(x, shape, dt, ctx.device), ty = Tensor::empty(shape, dt, ctx.device);
        Tensor tpos = make_i32(pos, ctx.device), tinv = make(inv, {s.HD / 2}, DType::f32, ctx.device);
        rope_fwd(tx, tpos, tinv, ty);
        Tensor tdy = make(dy, shape, dt, ctx.device), tdx = Tensor::empty(shape, dt, ctx.device);
        rope_bwd(tdy, tpos, tinv, tdx);
        std::vector<double> ry(n), rdx(n);
        rope_fwd_ref(to_double(x).data(), pos.data(), to_double(inv).data(), ry.data(), s.N, s.NH, s.HD);
        rope_bwd_ref(to_double(dy).data(), pos.data(), to_double(inv).data(), rdx.data(), s.N, s.NH, s.HD);
        rope_fwd(tx, tpos, tinv, tx);     // in place
        rope_bwd(tdy, tpos, tinv, tdy);
        const double tol = derived_tol(dt, kChain, 2);
        return std::vector<Check>{compare("y", ty, ry, tol), compare("dx", tdx, rdx, derived_tol(dt, kChain, 3)),
                                  compare("y (in place)", tx, ry, tol),
                                  compare("dx (in place)", tdy, rdx, derived_tol(dt, kChain, 3))};
      };
      if (dt == DType::f32 && n <= 2000) {
        c.grad = [=](const Ctx& ctx) {
          auto x = to_double(rand_normal(n, ctx.seed, 1, 1.f, DType::f32));
          auto g = to_double(rand_normal(n, ctx.seed, 2, 1.f, DType::f32));
          auto pos = rand_pos(s.N, ctx.seed);
          auto inv = to_double(freqs_for(s.HD));
          auto f = [&](const std::vector<double>& xx) {
            std::vector<double> y(n);
            rope_fwd_ref(xx.data(), pos.data(), inv.data(), y.data(), s.N, s.NH, s.HD);
            return y;
          };
          std::vector<double> dx(n);
          rope_bwd_ref(g.data(), pos.data(), inv.data(), dx.data(), s.N, s.NH, s.HD);
          // Linear in x: central differences are exact up to fp64 rounding (~1e-10).
          return std::vector<Check>{compare("dx vs finite differences", std::vector<float>(dx.begin(), dx.end()),
                                            finite_diff(f, x, g), 1e-6)};
        };
      }
      out.push_back(c);
    }
  // Perf: Llama-3-8B's q (32 heads of 128) for a training batch of 8192 tokens, and one decode token.
  for (int64_t N : {int64_t(8192), int64_t(1)}) {
    OpCase c{"rope", str("rope(bf16,", shape_str({N, 32, 128}), ",in place)")};
    c.perf = [=](const Ctx& ctx) {
      const DType dt = DType::bf16;
      const Shape shape = {N, 32, 128};
      Tensor x = make(rand_normal(size_t(N * 32 * 128), ctx.seed, 1, 1.f, dt), shape, dt, ctx.device);
      Tensor tpos = make_i32(rand_pos(N, ctx.seed), ctx.device), tinv = make(freqs_for(128), {64}, DType::f32, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { rope_fwd(x, tpos, tinv, x); });
      r.bytes = 2.0 * double(x.nbytes()) + 4.0 * N;
      return r;
    };
    out.push_back(c);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
