#include "harness.h"
#include "kernels/rms_norm/rms_norm.h"

namespace anvil::test {
namespace {

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct S { int64_t N, C; };
  // Odd sizes catch tails that are not multiples of the block or of the 16-byte pack.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (S s : {S{1, 7}, S{3, 100}, S{64, 4096}, S{5, 1000}, S{2, 8200}}) {
      const float eps = 1e-5f;
      std::string id = str("rms_norm(", dtype_name(dt), ",", shape_str({s.N, s.C}), ",eps=1e-5)");
      OpCase c{"rms_norm", id};
      c.test = [=](const Ctx& ctx) {
        auto x = rand_normal(size_t(s.N * s.C), ctx.seed, 1, 1.f, dt);
        auto w = rand_uniform(size_t(s.C), ctx.seed, 2, 0.5f, 1.5f, dt);
        auto dy = rand_normal(size_t(s.N * s.C), ctx.seed, 3, 1.f, dt);
        Tensor tx = make(x, {s.N, s.C}, dt, ctx.device), tw = make(w, {s.C}, dt, ctx.device);
        Tensor ty = Tensor::empty({s.N, s.C}, dt, ctx.device), tr = Tensor::empty({s.N}, DType::f32, ctx.device);
        rms_norm_fwd(tx, tw, eps, ty, tr);
        std::vector<double> ry(x.size()), rr(size_t(s.N));
        rms_norm_fwd_ref(to_double(x).data(), to_double(w).data(), ry.data(), rr.data(), s.N, s.C, eps);
        // Backward from the same forward.
        Tensor tdy = make(dy, {s.N, s.C}, dt, ctx.device), tdx = Tensor::empty({s.N, s.C}, dt, ctx.device);
        auto dw0 = rand_normal(size_t(s.C), ctx.seed, 4, 1.f, DType::f32);  // dw accumulates: start non-zero
        Tensor tdw = make(dw0, {s.C}, DType::f32, ctx.device);
        rms_norm_bwd(tdy, tx, tw, tr, tdx, tdw);
        std::vector<double> rdx(x.size()), rdw = to_double(dw0);
        rms_norm_bwd_ref(to_double(dy).data(), to_double(x).data(), to_double(w).data(), rr.data(), rdx.data(),
                         rdw.data(), s.N, s.C);
        return std::vector<Check>{compare("y", ty, ry, derived_tol(dt, double(s.C), 2)),
                                  compare("rstd", tr, rr, derived_tol(DType::f32, double(s.C), 2)),
                                  compare("dx", tdx, rdx, derived_tol(dt, double(s.C), 3)),
                                  compare("dw", tdw, rdw, derived_tol(DType::f32, double(s.C + s.N), 3))};
      };
      if (s.N * s.C <= 1000 && dt == DType::f32) {
        c.grad = [=](const Ctx& ctx) {
          auto x = to_double(rand_normal(size_t(s.N * s.C), ctx.seed, 1, 1.f, DType::f32));
          auto w = to_double(rand_uniform(size_t(s.C), ctx.seed, 2, 0.5f, 1.5f, DType::f32));
          auto g = to_double(rand_normal(size_t(s.N * s.C), ctx.seed, 3, 1.f, DType::f32));
          auto fx = [&](const std::vector<double>& xx) {
            std::vector<double> y(xx.size()), r(size_t(s.N));
            rms_norm_fwd_ref(xx.data(), w.data(), y.data(), r.data(), s.N, s.C, eps);
            return y;
          };
          auto fw = [&](const std::vector<double>& ww) {
            std::vector<double> y(x.size()), r(size_t(s.N));
            rms_norm_fwd_ref(x.data(), ww.data(), y.data(), r.data(), s.N, s.C, eps);
            return y;
          };
          std::vector<double> y(x.size()), r(size_t(s.N)), dx(x.size()), dw(size_t(s.C), 0.0);
          rms_norm_fwd_ref(x.data(), w.data(), y.data(), r.data(), s.N, s.C, eps);
          rms_norm_bwd_ref(g.data(), x.data(), w.data(), r.data(), dx.data(), dw.data(), s.N, s.C);
          // Central differences in fp64 with h=1e-6 err by ~1e-9 relative; 1e-6 is a safe bound.
          return std::vector<Check>{compare("dx vs finite differences", std::vector<float>(dx.begin(), dx.end()),
                                            finite_diff(fx, x, g), 1e-6),
                                    compare("dw vs finite differences", std::vector<float>(dw.begin(), dw.end()),
                                            finite_diff(fw, w, g), 1e-6)};
        };
      }
      if (s.N == 64 && s.C == 4096) {
        c.perf = [=](const Ctx& ctx) {
          const int64_t N = 8192, C = 4096;
          Tensor tx = make(rand_normal(size_t(N * C), ctx.seed, 1, 1.f, dt), {N, C}, dt, ctx.device);
          Tensor tw = make(rand_uniform(size_t(C), ctx.seed, 2, 0.5f, 1.5f, dt), {C}, dt, ctx.device);
          Tensor ty = Tensor::empty({N, C}, dt, ctx.device), tr = Tensor::empty({N}, DType::f32, ctx.device);
          PerfResult r;
          r.us = time_us(ctx, [&] { rms_norm_fwd(tx, tw, eps, ty, tr); });
          r.bytes = 2.0 * double(N * C) * dtype_size(dt);
          r.shape = shape_str({N, C});
          return r;
        };
      }
      out.push_back(c);
    }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
