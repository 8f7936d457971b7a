#include <cmath>

#include "harness.h"
#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil::test {
namespace {

struct S { int64_t N, V, C, chunk; };

// Targets in [0, V) with every 5th row ignored (-1); row 1 takes the last vocabulary entry (the partial chunk).
std::vector<int32_t> make_targets(S s, uint64_t seed) {
  auto u = rand_uniform(size_t(s.N), seed, 5, 0.f, 1.f, DType::f32);
  std::vector<int32_t> t(size_t(s.N));
  for (int64_t n = 0; n < s.N; n++) t[n] = n % 5 == 4 ? -1 : int32_t(std::min<int64_t>(s.V - 1, int64_t(u[n] * s.V)));
  if (s.N > 1) t[1] = int32_t(s.V - 1);
  return t;
}

struct Inputs {
  std::vector<float> h, w, dloss, dw0;
  std::vector<int32_t> t;
};
// Logits ~ N(0, 4): h ~ N(0, 1), w ~ N(0, 2/sqrt(C)), so the softmax is neither flat nor one-hot.
Inputs inputs(S s, uint64_t seed, DType dt) {
  return {rand_normal(size_t(s.N * s.C), seed, 1, 1.f, dt),
          rand_normal(size_t(s.V * s.C), seed, 2, 2.f / std::sqrt(float(s.C)), dt),
          rand_uniform(size_t(s.N), seed, 3, 0.5f, 1.5f, DType::f32),
          rand_normal(size_t(s.V * s.C), seed, 4, 1.f, DType::f32),  // dw accumulates: start non-zero
          make_targets(s, seed)};
}

Tensor make_i32(std::vector<int32_t>& v, Device d) {
  return Tensor::from_blob(v.data(), {int64_t(v.size())}, DType::i32, Device::cpu()).to(d);
}

std::vector<Check> run_and_compare(const Ctx& ctx, S s, DType dt, Inputs& in) {
  auto h = to_double(in.h), w = to_double(in.w), dl = to_double(in.dloss);
  std::vector<double> loss(size_t(s.N)), lse(size_t(s.N)), dh(h.size()), dw = to_double(in.dw0);
  cross_entropy_fwd_ref(h.data(), w.data(), in.t.data(), loss.data(), lse.data(), s.N, s.V, s.C);
  cross_entropy_bwd_ref(dl.data(), h.data(), w.data(), in.t.data(), dh.data(), dw.data(), s.N, s.V, s.C);

  const Device d = ctx.device;
  Tensor th = make(in.h, {s.N, s.C}, dt, d), tw = make(in.w, {s.V, s.C}, dt, d), tt = make_i32(in.t, d);
  Tensor tloss = Tensor::empty({s.N}, DType::f32, d), tlse = Tensor::empty({s.N}, DType::f32, d);
  cross_entropy_fwd(th, tw, tt, tloss, tlse, s.chunk);
  Tensor tdl = make(in.dloss, {s.N}, DType::f32, d), tdh = Tensor::empty({s.N, s.C}, dt, d);
  Tensor tdw = make(in.dw0, {s.V, s.C}, DType::f32, d);
  cross_entropy_bwd(tdl, th, tw, tt, tlse, tdh, tdw, s.chunk);
  // lse and loss: f32 results of C-term logits and a V-term sum. The gradients: dlogits are rounded once into
  // the dtype (the GEMM inputs share it), then dh once more: two roundings where derived_tol counts one, so
  // dh takes the dtype term twice. dw (f32) sees the one rounding of dlogits, but a target column's dlogit
  // (about -dloss, up to 1.5 here) multiplies h entries of up to ~4 sigma: a single term can err by 6u
  // against rms(dw) ~ 1, beyond derived_tol's 3u, so dw takes the dtype term twice too. Every dlogit carries
  // the error of its row's lse (a V-term sum) and logit (a C-term dot product): k_len = V + C for dh, plus
  // the N rows that dw sums over.
  const double u = dtype_unit_roundoff(dt);
  std::vector<Check> out = {compare("loss", tloss, loss, derived_tol(DType::f32, double(s.C + s.V), 2)),
                            compare("lse", tlse, lse, derived_tol(DType::f32, double(s.C + s.V), 2)),
                            compare("dh", tdh, dh, derived_tol(dt, double(s.V + s.C), 3) + 3 * u),
                            compare("dw", tdw, dw, derived_tol(dt, double(s.N + s.V + s.C), 3) + 3 * u)};
  // cross_entropy_fwd_bwd (row passes): the same results within the same bounds. Rows per pass: a third of N
  // (3-4 passes, the last one short) when the case chunks, else the front-end's choice (one pass here).
  const int64_t rows = s.chunk > 0 ? std::max<int64_t>(1, s.N / 3) : 0;
  Tensor floss = Tensor::empty({s.N}, DType::f32, d), fdh = Tensor::empty({s.N, s.C}, dt, d);
  Tensor fdw = make(in.dw0, {s.V, s.C}, DType::f32, d);
  cross_entropy_fwd_bwd(th, tw, tt, tdl, floss, fdh, fdw, rows);
  const std::string tag = str("fwd_bwd(rows=", rows, ") ");
  out.push_back(compare(tag + "loss", floss, loss, derived_tol(DType::f32, double(s.C + s.V), 2)));
  out.push_back(compare(tag + "dh", fdh, dh, derived_tol(dt, double(s.V + s.C), 3) + 3 * u));
  out.push_back(compare(tag + "dw", fdw, dw, derived_tol(dt, double(s.N + s.V + s.C), 3) + 3 * u));
  return out;
}

std::vector<Check> error_test(const Ctx& ctx) {
  const Device d = ctx.device;
  const int64_t N = 4, V = 10, C = 8;
  Tensor h = make(rand_normal(N * C, ctx.seed, 1, 1.f, DType::f32), {N, C}, DType::f32, d);
  Tensor w = make(rand_normal(V * C, ctx.seed, 2, 1.f, DType::f32), {V, C}, DType::f32, d);
  Tensor loss = Tensor::empty({N}, DType::f32, d), lse = Tensor::empty({N}, DType::f32, d);
  std::vector<Check> out;
  for (int32_t bad : {int32_t(V), -2}) {
    std::vector<int32_t> t{0, 3, bad, -1};
    Tensor tt = make_i32(t, d);
    try {
      cross_entropy_fwd(h, w, tt, loss, lse);
      out.push_back({false, str("target ", bad, ": no error")});
    } catch (const Error& e) {
      out.push_back({true, str("target ", bad, ": ", e.what())});
    }
  }
  {  // the fused form checks its targets and its own outputs too
    std::vector<int32_t> t{0, 3, int32_t(V), -1};
    Tensor tt = make_i32(t, d), dl = Tensor::zeros({N}, DType::f32, d), dh = Tensor::empty({N, C}, DType::f32, d);
    Tensor dw = Tensor::zeros({V, C}, DType::f32, d), dwbf = Tensor::zeros({V, C}, DType::bf16, d);
    out.push_back(expect_error("fwd_bwd: target V", "targets[2]",
                               [&] { cross_entropy_fwd_bwd(h, w, tt, dl, loss, dh, dw); }));
    t[2] = 9;
    Tensor ok = make_i32(t, d);
    out.push_back(expect_error("fwd_bwd: bf16 dw", "dw", [&] { cross_entropy_fwd_bwd(h, w, ok, dl, loss, dh, dwbf); }));
    out.push_back(expect_error("fwd_bwd: chunk_rows -1", "chunk", [&] { cross_entropy_fwd_bwd(h, w, ok, dl, loss, dh, dw, -1); }));
  }
  std::vector<int32_t> t{0, 3, 9, -1};
  Tensor tt = make_i32(t, d), wbad = Tensor::zeros({V, C + 1}, DType::f32, d);
  try {
    cross_entropy_fwd(h, wbad, tt, loss, lse);
    out.push_back({false, "w with another C: no error"});
  } catch (const Error& e) {
    out.push_back({true, str("w with another C: ", e.what())});
  }
  return out;
}

// Perf inputs: a 1M-value random block repeated (random values matter for the exponentials, not their
// independence; generating 525M normals on the host would take longer than the benchmark).
Tensor big(const Shape& shape, DType dt, const Ctx& ctx, uint64_t salt, float stddev) {
  const auto block = rand_normal(size_t(1) << 20, ctx.seed, salt, stddev, dt);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); i++) v[i] = block[i & (block.size() - 1)];
  return make(v, shape, dt, ctx.device);
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // V never a multiple of the chunk; chunks force 2..17 passes; the last shape lets the front-end choose.
  const S shapes[] = {{6, 50, 16, 7}, {5, 1000, 64, 300}, {17, 5003, 96, 1024}, {64, 2049, 80, 512},
                      {33, 3001, 64, 0}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (S s : shapes) {
      OpCase c{"cross_entropy", str("cross_entropy(", dtype_name(dt), ",", shape_str({s.N, s.V, s.C}), ",chunk=",
                                    s.chunk, ")")};
      c.test = [=](const Ctx& ctx) {
        Inputs in = inputs(s, ctx.seed, dt);
        return run_and_compare(ctx, s, dt, in);
      };
      if (dt == DType::f32 && s.V * s.C <= 1000) {
        c.grad = [=](const Ctx& ctx) {
          Inputs in = inputs(s, ctx.seed, DType::f32);
          auto h = to_double(in.h), w = to_double(in.w), g = to_double(in.dloss);
          auto loss_of = [&](const std::vector<double>& hh, const std::vector<double>& ww) {
            std::vector<double> loss(size_t(s.N)), lse(size_t(s.N));
            cross_entropy_fwd_ref(hh.data(), ww.data(), in.t.data(), loss.data(), lse.data(), s.N, s.V, s.C);
            return loss;
          };
          std::vector<double> dh(h.size()), dw(w.size(), 0.0);
          cross_entropy_bwd_ref(g.data(), h.data(), w.data(), in.t.data(), dh.data(), dw.data(), s.N, s.V, s.C);
          auto fd_h = finite_diff([&](const std::vector<double>& x) { return loss_of(x, w); }, h, g);
          auto fd_w = finite_diff([&](const std::vector<double>& x) { return loss_of(h, x); }, w, g);
          auto f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
          // Central differences in fp64 with h = 1e-6 err by ~1e-9 relative; 1e-6 is a safe bound.
          std::vector<Check> checks{compare("dh vs finite differences", f(dh), fd_h, 1e-6),
                                    compare("dw vs finite differences", f(dw), fd_w, 1e-6)};
          for (auto& ch : run_and_compare(ctx, s, DType::f32, in)) checks.push_back(ch);
          return checks;
        };
      }
      out.push_back(c);
    }
  OpCase ec{"cross_entropy", "cross_entropy(errors)"};
  ec.test = error_test;
  out.push_back(ec);

  // Perf: Llama-3 vocabulary (128256) at 16k tokens, C = 4096, bf16. Forward 2NVC flops; backward recomputes
  // the logits and runs two more GEMMs: 6NVC.
  const int64_t N = 16384, V = 128256, C = 4096;
  const DType bf = DType::bf16;
  for (int kind : {0, 1, 2}) {  // fwd (2NVC), bwd (6NVC), fused fwd_bwd (6NVC: the logits once)
    const bool bwd = kind == 1;
    const char* name[3] = {"cross_entropy_fwd(", "cross_entropy_bwd(", "cross_entropy_fwd_bwd("};
    OpCase p{"cross_entropy", str(name[kind], "bf16,", shape_str({N, V, C}), ")")};
    p.perf = [=](const Ctx& ctx) {
      Tensor h = big({N, C}, bf, ctx, 1, 1.f), w = big({V, C}, bf, ctx, 2, 2.f / 64);
      std::vector<int32_t> t(N);
      for (int64_t n = 0; n < N; n++) t[n] = int32_t((n * 7919) % V);
      Tensor tt = make_i32(t, ctx.device);
      Tensor loss = Tensor::empty({N}, DType::f32, ctx.device), lse = Tensor::empty({N}, DType::f32, ctx.device);
      PerfResult r;
      if (kind == 2) {
        Tensor dl = make(std::vector<float>(size_t(N), 1.f / N), {N}, DType::f32, ctx.device);
        Tensor dh = Tensor::empty({N, C}, bf, ctx.device), dw = Tensor::zeros({V, C}, DType::f32, ctx.device);
        r.us = time_us(ctx, [&] { cross_entropy_fwd_bwd(h, w, tt, dl, loss, dh, dw); }, 5);
        r.flops = 6.0 * N * V * C;
      } else if (!bwd) {
        r.us = time_us(ctx, [&] { cross_entropy_fwd(h, w, tt, loss, lse); }, 5);
        r.flops = 2.0 * N * V * C;
      } else {
        cross_entropy_fwd(h, w, tt, loss, lse);
        Tensor dl = make(std::vector<float>(size_t(N), 1.f / N), {N}, DType::f32, ctx.device);
        Tensor dh = Tensor::empty({N, C}, bf, ctx.device), dw = Tensor::zeros({V, C}, DType::f32, ctx.device);
        r.us = time_us(ctx, [&] { cross_entropy_bwd(dl, h, w, tt, lse, dh, dw); }, 5);
        r.flops = 6.0 * N * V * C;
      }
      r.bytes = double(N * C + V * C) * 2;
      return r;
    };
    out.push_back(p);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
