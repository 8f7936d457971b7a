#include "harness.h"
#include "kernels/rope/rope.h"
#include "kernels/rope_append/rope_append.h"

namespace anvil::test {
namespace {

// As rope: ~4 f32 roundings per rotated output before the one into the dtype; v is copied exactly.
constexpr double kChain = 4;

Tensor make_i32(const std::vector<int32_t>& v, Device d) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t.to(d);
}

struct S {
  int64_t B, T, NH, NKV, HD, Tmax;
  std::vector<int32_t> start;  // per sequence; the last case puts one sequence past the cache (rows skipped)
};

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  const std::vector<S> shapes = {
      {1, 1, 2, 1, 8, 5, {3}},                 // one decode token, scalar path for f32 (HD/2 = 4)
      {3, 4, 4, 2, 64, 9, {0, 5, 2}},          // a prefill of 4 into caches at different depths
      {2, 1, 32, 8, 128, 40, {39, 17}},        // the 8B head layout, last cache row
      {2, 3, 2, 1, 10, 6, {4, 0}},             // HD/2 = 5: no 16-byte pack; tokens 2.. of sequence 0 skipped
  };
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (const S& s : shapes) {
      OpCase c{"rope_append", str("rope_append(", dtype_name(dt), ",B=", s.B, ",T=", s.T, ",NH=", s.NH, ",NKV=",
                                  s.NKV, ",HD=", s.HD, ",Tmax=", s.Tmax, ")")};
      c.test = [=](const Ctx& ctx) {
        const int64_t row = (s.NH + 2 * s.NKV) * s.HD, nq = s.B * s.T * s.NH * s.HD;
        const int64_t nc = s.B * s.Tmax * s.NKV * s.HD;
        auto x = rand_normal(size_t(s.B * s.T * row), ctx.seed, 1, 1.f, dt);
        auto k0 = rand_normal(size_t(nc), ctx.seed, 2, 1.f, dt), v0 = rand_normal(size_t(nc), ctx.seed, 3, 1.f, dt);
        RopeConfig rc;
        if (s.HD >= 64) rc.theta = 500000, rc.type = "llama3";
        auto inv = rope_inv_freq(rc, s.HD);
        Tensor tx = make(x, {s.B, s.T, row}, dt, ctx.device), tq = Tensor::empty({s.B, s.T, s.NH, s.HD}, dt, ctx.device);
        Tensor tk = make(k0, {s.B, s.Tmax, s.NKV, s.HD}, dt, ctx.device);
        Tensor tv = make(v0, {s.B, s.Tmax, s.NKV, s.HD}, dt, ctx.device);
        Tensor tinv = make(inv, {s.HD / 2}, DType::f32, ctx.device), tstart = make_i32(s.start, ctx.device);
        rope_append(tx, tstart, tinv, tq, tk, tv);
        std::vector<double> rq(static_cast<size_t>(nq));
        std::vector<double> rk = to_double(k0), rv = to_double(v0);
        rope_append_ref(to_double(x).data(), s.start.data(), to_double(inv).data(), rq.data(), rk.data(), rv.data(),
                        s.B, s.T, s.NH, s.NKV, s.HD, s.Tmax);
        const double tol = derived_tol(dt, kChain, 2);
        return std::vector<Check>{compare("q", tq, rq, tol), compare("k_cache", tk, rk, tol),
                                  compare("v_cache (exact copy)", tv, rv, 0.0)};
      };
      out.push_back(c);
    }
  // Bad input: a cache whose head count disagrees with qkv's row.
  {
    OpCase c{"rope_append", "rope_append(bad shapes are errors)"};
    c.test = [](const Ctx& ctx) {
      Tensor x = Tensor::zeros({1, 1, 4 * 8}, DType::f32, ctx.device), q = Tensor::empty({1, 1, 2, 8}, DType::f32, ctx.device);
      Tensor k = Tensor::zeros({1, 4, 2, 8}, DType::f32, ctx.device), v = Tensor::zeros({1, 4, 2, 8}, DType::f32, ctx.device);
      Tensor inv = Tensor::zeros({4}, DType::f32, ctx.device), st = Tensor::zeros({1}, DType::i32, ctx.device);
      std::string msg;
      try {
        rope_append(x, st, inv, q, k, v);  // NH=2, NKV=2 needs rows of 48, not 32
      } catch (const Error& e) {
        msg = e.what();
      }
      Check ck;
      ck.ok = msg.find("qkv") != std::string::npos;
      ck.detail = msg.empty() ? "no error for a qkv row of 32 with NH=2, NKV=2, HD=8" : "error: " + msg;
      return std::vector<Check>{ck};
    };
    out.push_back(c);
  }
  // Perf: one decode token of the 8B shape (B=1: 6 KB in, 4 KB of q, 4 KB into the caches at row 100).
  {
    OpCase c{"rope_append", "rope_append(bf16,B=1,T=1,NH=32,NKV=8,HD=128,Tmax=2048)"};
    c.perf = [](const Ctx& ctx) {
      const DType dt = DType::bf16;
      Tensor x = make(rand_normal(48 * 128, ctx.seed, 1, 1.f, dt), {1, 1, 48 * 128}, dt, ctx.device);
      Tensor q = Tensor::empty({1, 1, 32, 128}, dt, ctx.device);
      Tensor k = Tensor::zeros({1, 2048, 8, 128}, dt, ctx.device), v = Tensor::zeros({1, 2048, 8, 128}, dt, ctx.device);
      RopeConfig rc;
      auto inv = rope_inv_freq(rc, 128);
      Tensor tinv = make(inv, {64}, DType::f32, ctx.device), st = make_i32({100}, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { rope_append(x, st, tinv, q, k, v); });
      r.bytes = 2.0 * (48 * 128 + 32 * 128 + 16 * 128);
      return r;
    };
    out.push_back(c);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
