#include <cmath>

#include "harness.h"
#include "kernels/embedding/embedding.h"

namespace anvil::test {
namespace {

// N ids in [0, V), seeded; small V makes repeats (the backward must add them up).
std::vector<int32_t> rand_ids(int64_t N, int64_t V, uint64_t seed) {
  auto u = rand_uniform(size_t(N), seed, 5, 0.f, 1.f, DType::f32);
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t(std::min<int64_t>(V - 1, int64_t(u[i] * float(V))));
  return ids;
}
Tensor make_ids(const std::vector<int32_t>& ids, Device d) {
  Tensor t = Tensor::empty({int64_t(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), t.data<int32_t>());
  return t.to(d);
}
// How often the most repeated id occurs: the longest sum in one dtable element.
double max_repeats(const std::vector<int32_t>& ids, int64_t V) {
  std::vector<int> n(size_t(V), 0);
  int m = 1;
  for (int32_t i : ids) m = std::max(m, ++n[size_t(i)]);
  return m;
}

std::string id_of(const char* what, DType dt, int64_t N, int64_t V, int64_t C) {
  return str(what, "(", dtype_name(dt), ",", shape_str({N, C}), ",V=", V, ")");
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct S { int64_t N, V, C; };
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (S s : {S{1, 10, 7}, S{37, 50, 100}, S{5, 3, 1000}, S{64, 256, 4096}, S{9, 20, 8200}}) {
      OpCase c{"embedding", id_of("embedding", dt, s.N, s.V, s.C)};
      c.test = [=](const Ctx& ctx) {
        auto ids = rand_ids(s.N, s.V, ctx.seed);
        auto table = rand_normal(size_t(s.V * s.C), ctx.seed, 1, 1.f, dt);
        auto dout = rand_normal(size_t(s.N * s.C), ctx.seed, 2, 1.f, dt);
        auto dt0 = rand_normal(size_t(s.V * s.C), ctx.seed, 3, 1.f, DType::f32);  // dtable accumulates
        Tensor tids = make_ids(ids, ctx.device), ttab = make(table, {s.V, s.C}, dt, ctx.device);
        Tensor tout = Tensor::empty({s.N, s.C}, dt, ctx.device);
        embedding_fwd(tids, ttab, tout);
        std::vector<double> rout(size_t(s.N * s.C)), rdt = to_double(dt0);
        embedding_fwd_ref(ids.data(), to_double(table).data(), rout.data(), s.N, s.V, s.C);
        Tensor tdout = make(dout, {s.N, s.C}, dt, ctx.device), tdt = make(dt0, {s.V, s.C}, DType::f32, ctx.device);
        embedding_bwd(tdout, tids, tdt);
        embedding_bwd_ref(to_double(dout).data(), ids.data(), rdt.data(), s.N, s.V, s.C);
        // The forward copies (exact); dtable sums up to max_repeats terms plus its start value in f32.
        return std::vector<Check>{compare("out", tout, rout, derived_tol(dt, 1, 2)),
                                  compare("dtable", tdt, rdt, derived_tol(DType::f32, max_repeats(ids, s.V) + 1, 3))};
      };
      if (dt == DType::f32 && s.N * s.C <= 5000 && s.V * s.C <= 5000) {
        c.grad = [=](const Ctx& ctx) {
          auto ids = rand_ids(s.N, s.V, ctx.seed);
          auto table = to_double(rand_normal(size_t(s.V * s.C), ctx.seed, 1, 1.f, DType::f32));
          auto g = to_double(rand_normal(size_t(s.N * s.C), ctx.seed, 2, 1.f, DType::f32));
          auto f = [&](const std::vector<double>& tab) {
            std::vector<double> o(size_t(s.N * s.C));
            embedding_fwd_ref(ids.data(), tab.data(), o.data(), s.N, s.V, s.C);
            return o;
          };
          std::vector<double> dtab(table.size(), 0.0);
          embedding_bwd_ref(g.data(), ids.data(), dtab.data(), s.N, s.V, s.C);
          // The forward is linear, so central differences are exact up to fp64 rounding (~1e-10).
          return std::vector<Check>{compare("dtable vs finite differences",
                                            std::vector<float>(dtab.begin(), dtab.end()), finite_diff(f, table, g),
                                            1e-6)};
        };
      }
      if (dt == DType::bf16 && s.C == 4096) {
        c.perf = [=](const Ctx& ctx) {  // a training batch of 8192 tokens of a 4096-wide model
          const int64_t N = 8192, V = 4096, C = 4096;
          Tensor tids = make_ids(rand_ids(N, V, ctx.seed), ctx.device);
          Tensor ttab = make(rand_normal(size_t(V * C), ctx.seed, 1, 1.f, dt), {V, C}, dt, ctx.device);
          Tensor tout = Tensor::empty({N, C}, dt, ctx.device);
          PerfResult r;
          r.us = time_us(ctx, [&] { embedding_fwd(tids, ttab, tout); });
          r.bytes = 2.0 * double(N * C) * dtype_size(dt) + 4.0 * N;  // rows read + written, ids
          return r;
        };
        OpCase b{"embedding", id_of("embedding_bwd", dt, 8192, 4096, 4096)};
        b.perf = [=](const Ctx& ctx) {
          const int64_t N = 8192, V = 4096, C = 4096;
          Tensor tids = make_ids(rand_ids(N, V, ctx.seed), ctx.device);
          Tensor tdout = make(rand_normal(size_t(N * C), ctx.seed, 2, 1.f, dt), {N, C}, dt, ctx.device);
          Tensor tdt = Tensor::zeros({V, C}, DType::f32, ctx.device);
          PerfResult r;
          r.us = time_us(ctx, [&] { embedding_bwd(tdout, tids, tdt); });
          r.bytes = double(N * C) * (dtype_size(dt) + 2.0 * 4) + 4.0 * N;  // dout read; f32 read-modify-write
          return r;
        };
        out.push_back(b);
      }
      out.push_back(c);
    }

  // Out-of-range ids: an Error naming the first bad position and its value, never a crash.
  OpCase bad{"embedding", "embedding(bad ids)"};
  bad.test = [](const Ctx& ctx) {
    const int64_t V = 10, C = 16;
    std::vector<int32_t> ids = {1, 2, 3, -2, 4, 10, 5};
    Tensor tids = make_ids(ids, ctx.device);
    Tensor ttab = make(rand_normal(size_t(V * C), ctx.seed, 1, 1.f, DType::f32), {V, C}, DType::f32, ctx.device);
    Tensor tout = Tensor::empty({int64_t(ids.size()), C}, DType::f32, ctx.device);
    Tensor tdout = make(rand_normal(ids.size() * C, ctx.seed, 2, 1.f, DType::f32), {int64_t(ids.size()), C},
                        DType::f32, ctx.device);
    Tensor tdt = Tensor::zeros({V, C}, DType::f32, ctx.device);
    std::vector<Check> r;
    if (ctx.device.is_cpu()) {
      r.push_back(expect_error("fwd", "ids[3] = -2", [&] { embedding_fwd(tids, ttab, tout); }));
      r.push_back(expect_error("bwd", "ids[3] = -2", [&] { embedding_bwd(tdout, tids, tdt); }));
    } else {
      // The GPU kernels clamp and record; embedding_check_ids reports what the forward met.
      embedding_fwd(tids, ttab, tout);
      r.push_back(expect_error("fwd, then check", "ids[3] = -2",
                               [&] { embedding_check_ids(make_ids({0, 1}, ctx.device), V); }));
    }
    r.push_back(expect_error("check_ids", "ids[3] = -2", [&] { embedding_check_ids(tids, V); }));
    std::vector<int32_t> high = {0, 9, 12};
    r.push_back(expect_error("check_ids", "ids[2] = 12", [&] { embedding_check_ids(make_ids(high, ctx.device), V); }));
    bool clean = true;
    try {
      embedding_check_ids(make_ids({0, 9}, ctx.device), V);  // the error word was cleared by the last report
    } catch (const Error&) {
      clean = false;
    }
    r.push_back({clean, "check_ids on good ids after a reported error passes"});
    return r;
  };
  out.push_back(bad);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
