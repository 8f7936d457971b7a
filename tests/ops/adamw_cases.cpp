#include <cmath>

#include "harness.h"
#include "kernels/adamw/adamw.h"

namespace anvil::test {
namespace {

// Three consecutive steps (t = 4, 5, 6) from a non-zero state, with weight decay and a gradient scale, so
// every term of the update matters: lr 1e-2 moves p ~ U(-1, 1) by about 1% per step.
AdamWParams params(int64_t step) {
  AdamWParams p;
  p.lr = 1e-2f;
  p.beta1 = 0.9f;
  p.beta2 = 0.999f;
  p.eps = 1e-8f;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.5f;
  p.step = step;
  return p;
}
constexpr int kSteps = 3;
constexpr int64_t kFirstStep = 4;

// out_dt: dtype of param_out, f32 = none.
std::vector<Check> run(const Ctx& ctx, int64_t n, DType out_dt) {
  const Device d = ctx.device;
  auto p0 = rand_uniform(size_t(n), ctx.seed, 1, -1.f, 1.f, DType::f32);
  auto m0 = rand_normal(size_t(n), ctx.seed, 2, 0.1f, DType::f32);
  auto v0 = rand_uniform(size_t(n), ctx.seed, 3, 0.f, 0.02f, DType::f32);
  Tensor tp = make(p0, {n}, DType::f32, d), tm = make(m0, {n}, DType::f32, d), tv = make(v0, {n}, DType::f32, d);
  Tensor tout = out_dt == DType::f32 ? Tensor() : Tensor::empty({n}, out_dt, d);
  auto rp = to_double(p0), rm = to_double(m0), rv = to_double(v0);
  for (int k = 0; k < kSteps; k++) {
    auto g = rand_normal(size_t(n), ctx.seed, 10 + k, 1.f, DType::f32);
    Tensor tg = make(g, {n}, DType::f32, d);
    const AdamWParams p = params(kFirstStep + k);
    adamw_step(tp, tg, tm, tv, p, tout);
    adamw_step_ref(rp.data(), to_double(g).data(), rm.data(), rv.data(), n, p.lr, p.beta1, p.beta2, p.eps,
                   p.weight_decay, p.step, p.grad_scale);
  }
  // Each step rounds about 5 f32 operations into p, m, v (the moments, the sqrt, the divide, the decay);
  // three chained steps: k_len = 15.
  std::vector<Check> out{compare("param", tp, rp, derived_tol(DType::f32, 15, 2)),
                         compare("m", tm, rm, derived_tol(DType::f32, 15, 2)),
                         compare("v", tv, rv, derived_tol(DType::f32, 15, 2))};
  if (tout.defined()) out.push_back(compare("param_out", tout, rp, derived_tol(out_dt, 15, 2)));
  return out;
}

std::vector<Check> error_test(const Ctx& ctx) {
  const Device d = ctx.device;
  Tensor p = Tensor::zeros({8}, DType::f32, d), g = Tensor::zeros({8}, DType::f32, d);
  Tensor m = Tensor::zeros({8}, DType::f32, d), v = Tensor::zeros({8}, DType::f32, d);
  Tensor none, g7 = Tensor::zeros({7}, DType::f32, d), o32 = Tensor::zeros({8}, DType::f32, d);
  auto expect_error = [&](const char* what, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return Check{true, str(what, ": ", e.what())};
    }
    return Check{false, str(what, ": no error")};
  };
  return {expect_error("grad of another size", [&] { adamw_step(p, g7, m, v, params(1), none); }),
          expect_error("f32 param_out", [&] { adamw_step(p, g, m, v, params(1), o32); }),
          expect_error("step 0", [&] { adamw_step(p, g, m, v, params(0), none); }),
          expect_error("beta2 = 1", [&] {
            AdamWParams q = params(1);
            q.beta2 = 1.f;
            adamw_step(p, g, m, v, q, none);
          })};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // Sizes around the 4-wide vector path and its scalar tail.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(4099), int64_t(65537)}) {
      OpCase c{"adamw", str("adamw(", dtype_name(dt), ",", shape_str({n}), ")")};
      c.test = [=](const Ctx& ctx) { return run(ctx, n, dt); };
      if (n == 65537) {
        // Perf: 250M parameters (a 1B-parameter model over 4 FSDP ranks). Bytes: read p g m v, write p m v
        // (f32) and param_out.
        c.perf = [=](const Ctx& ctx) {
          const int64_t N = 250'000'000;
          const auto block = rand_uniform(size_t(1) << 20, ctx.seed, 1, -1.f, 1.f, DType::f32);
          std::vector<float> host(N);
          for (size_t i = 0; i < host.size(); i++) host[i] = block[i & (block.size() - 1)];
          Tensor p = make(host, {N}, DType::f32, ctx.device), g = make(host, {N}, DType::f32, ctx.device);
          for (auto& x : host) x = std::fabs(x) * 0.01f;
          Tensor m = make(host, {N}, DType::f32, ctx.device), v = make(host, {N}, DType::f32, ctx.device);
          Tensor o = dt == DType::f32 ? Tensor() : Tensor::empty({N}, dt, ctx.device);
          PerfResult r;
          int64_t step = 1;
          r.us = time_us(ctx, [&] { adamw_step(p, g, m, v, params(step++), o); });
          r.bytes = double(N) * (7 * 4 + (o.defined() ? 2 : 0));
          return r;
        };
      }
      out.push_back(c);
    }
  OpCase ec{"adamw", "adamw(errors)"};
  ec.test = error_test;
  out.push_back(ec);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
