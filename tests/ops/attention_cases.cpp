#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness.h"
#include "kernels/attention/attention.h"

namespace anvil::test {
namespace {

struct S { int64_t B, T, NH, NKV, HD; };

std::string shape_id(const char* name, DType dt, S s) {
  return str(name, "(", dtype_name(dt), ",", shape_str({s.B, s.T, s.NH, s.NKV, s.HD}), ")");
}

// Tolerances: an output element is a softmax-weighted sum over up to T keys of values, with weights from
// scores that are HD-term dot products; the f32 roundings of both reductions add up, so k_len = T + HD.
// The gradients chain three HD-term dot products (the score, dP = dO . v, D = dO . out) into dS before the
// sum over T keys (dq) or over the T queries of each of the G = NH/NKV heads of the group (dk, dv):
// k_len = T + 3 HD and T G + 3 HD. (A numpy f32 emulation of the same math errs by up to 41 u(f32) at
// T = 7, HD = 64; the bound below is 3 (1 + sqrt(199)) = 45 u(f32) there.)
double k_out(S s) { return double(s.T + s.HD); }
double k_q(S s) { return double(s.T + 3 * s.HD); }
double k_kv(S s) { return double(s.T * (s.NH / s.NKV) + 3 * s.HD); }
// derived_tol counts one rounding into the dtype; a naive backward in that dtype rounds four intermediates
// (the stored out, P, dP, dS) before the final sum: the other three are added here.
double grad_tol(DType dt, double k_len) { return derived_tol(dt, k_len, 3) + 3 * 3 * dtype_unit_roundoff(dt); }

double rms(const std::vector<double>& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  return x.empty() ? 0 : std::sqrt(ss / double(x.size()));
}
double rms(const std::vector<float>& x) { return rms(to_double(x)); }

// derived_tol bounds the error relative to the result's own scale (|ref| + rms(ref)), but attention's results
// are sums whose terms are larger than the sum (cancellation), and the roundings err relative to the terms:
//   out = sum_j p_j v_j                         terms ~ rms(v)
//   dq  = scale sum_j p_j (dP_j - D) k_j        terms ~ scale rms(dP) rms(k), rms(dP) = sqrt(HD) rms(dO) rms(v)
//   dk  = scale sum_i p_i (dP_i - D) q_i        terms ~ scale rms(dP) rms(q) sqrt(G)
//   dv  = sum_i p_i dO_i                        terms ~ rms(dO) sqrt(G)
// (dk and dv add the independent errors of the G query heads of their group: sqrt(G).)
// (D = dO . out is computed from the stored out, rounded to its dtype, as flash attention does: the error of
// dP - D is u(dtype) relative to |dP|, not to |dP - D|; at T = 1, dq = dk = 0 exactly in fp64 while any
// fp32 evaluation leaves ~1e-7.) The lse is a smoothed maximum of scores, each a sum of HD terms
// scale q_d k_d: its error is relative to the scores' scale, scale sqrt(HD) rms(q) rms(k).
// So the bound is tol * (|ref| + max(rms(ref), rms(terms))).
Check compare_terms(const std::string& what, const Tensor& t, const std::vector<double>& ref, double tol,
                    double term_rms) {
  const std::vector<float> out = t.to_floats();
  const double floor = std::max(rms(ref), term_rms);
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); i++) {
    const double ratio = std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - ref[i]) / (tol * (std::fabs(ref[i]) + floor));
    if (!(ratio <= worst)) {
      worst = ratio;
      wi = i;
    }
  }
  Check c;
  c.ok = out.size() == ref.size() && worst <= 1.0;
  c.detail = str(what, ": worst err/bound ", fmt_g(worst), " at [", wi, "] got ", out.empty() ? 0.f : out[wi], " ref ",
                 ref.empty() ? 0.0 : ref[wi], " (tol ", fmt_g(tol), ", rms ", fmt_g(rms(ref)), ", terms ",
                 fmt_g(term_rms), ")");
  return c;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};
Inputs inputs(S s, uint64_t seed, DType dt) {
  const size_t nq = size_t(s.B * s.T * s.NH * s.HD), nk = size_t(s.B * s.T * s.NKV * s.HD);
  return {rand_normal(nq, seed, 1, 1.f, dt), rand_normal(nk, seed, 2, 1.f, dt), rand_normal(nk, seed, 3, 1.f, dt),
          rand_normal(nq, seed, 4, 1.f, dt)};
}

struct RefOut {
  std::vector<double> out, lse, dq, dk, dv;
};
RefOut reference(S s, const Inputs& in, double scale) {
  RefOut r;
  auto q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), g = to_double(in.dout);
  r.out.resize(q.size());
  r.lse.resize(size_t(s.B * s.NH * s.T));
  r.dq.resize(q.size());
  r.dk.resize(k.size());
  r.dv.resize(k.size());
  attention_fwd_ref(q.data(), k.data(), v.data(), r.out.data(), r.lse.data(), s.B, s.T, s.NH, s.NKV, s.HD, scale);
  attention_bwd_ref(g.data(), q.data(), k.data(), v.data(), r.dq.data(), r.dk.data(), r.dv.data(), s.B, s.T, s.NH,
                    s.NKV, s.HD, scale);
  return r;
}

// Forward and backward on the backend; checks against the reference.
std::vector<Check> run_and_compare(const Ctx& ctx, S s, DType dt, const Inputs& in, const RefOut& r, double scale) {
  const Shape qs{s.B, s.T, s.NH, s.HD}, ks{s.B, s.T, s.NKV, s.HD};
  Tensor q = make(in.q, qs, dt, ctx.device), k = make(in.k, ks, dt, ctx.device), v = make(in.v, ks, dt, ctx.device);
  Tensor out = Tensor::empty(qs, dt, ctx.device), lse = Tensor::empty({s.B, s.NH, s.T}, DType::f32, ctx.device);
  attention_fwd(q, k, v, float(scale), out, lse);
  Tensor g = make(in.dout, qs, dt, ctx.device);
  Tensor dq = Tensor::empty(qs, dt, ctx.device), dk = Tensor::empty(ks, dt, ctx.device);
  Tensor dv = Tensor::empty(ks, dt, ctx.device);
  attention_bwd(g, q, k, v, out, lse, float(scale), dq, dk, dv);
  const double rdp = std::sqrt(double(s.HD)) * rms(in.dout) * rms(in.v), sg = std::sqrt(double(s.NH / s.NKV));
  const double score = scale * std::sqrt(double(s.HD)) * rms(in.q) * rms(in.k);
  return {compare_terms("out", out, r.out, derived_tol(dt, k_out(s), 2), rms(in.v)),
          compare_terms("lse", lse, r.lse, derived_tol(DType::f32, k_out(s), 2), score),
          compare_terms("dq", dq, r.dq, grad_tol(dt, k_q(s)), scale * rdp * rms(in.k)),
          compare_terms("dk", dk, r.dk, grad_tol(dt, k_kv(s)), scale * rdp * rms(in.q) * sg),
          compare_terms("dv", dv, r.dv, grad_tol(dt, k_kv(s)), rms(in.dout) * sg)};
}

// Decode reference: softmax(scale q . k_j) over the first lens[b] cache rows (clamped to [0, Tmax]; none: zeros),
// times v_j, in fp64. (The same as the causal forward at its last row, without its T^2 cost at T = 2048.)
std::vector<double> decode_reference(S s, const std::vector<float>& q, const std::vector<float>& kc,
                                     const std::vector<float>& vc, const std::vector<int32_t>& lens, double scale) {
  const int64_t Tmax = s.T, G = s.NH / s.NKV;
  std::vector<double> ref(q.size(), 0.0), p(static_cast<size_t>(Tmax));
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.NH; h++) {
      const int64_t n = std::clamp<int64_t>(lens[size_t(b)], 0, Tmax), kvh = h / G;
      const float* qr = q.data() + (b * s.NH + h) * s.HD;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; j++) {
        const float* kr = kc.data() + ((b * Tmax + j) * s.NKV + kvh) * s.HD;
        double d = 0;
        for (int64_t i = 0; i < s.HD; i++) d += double(qr[i]) * double(kr[i]);
        p[size_t(j)] = scale * d;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (int64_t j = 0; j < n; j++) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      double* o = ref.data() + (b * s.NH + h) * s.HD;
      for (int64_t j = 0; j < n; j++) {
        const float* vr = vc.data() + ((b * Tmax + j) * s.NKV + kvh) * s.HD;
        for (int64_t i = 0; i < s.HD; i++) o[i] += p[size_t(j)] / sum * double(vr[i]);
      }
    }
  return ref;
}

// Decode against the reference, then twice more with a call of another shape in between (it runs on the same
// ticket counters of the GPU's one-launch combine): the repeats must give the same bits as the first call.
// Default lens: Tmax - 5 b (uneven lengths within the batch).
std::vector<Check> decode_test(const Ctx& ctx, S s, DType dt, std::vector<int32_t> lens = {}) {
  const int64_t Tmax = s.T;
  auto q = rand_normal(size_t(s.B * s.NH * s.HD), ctx.seed, 11, 1.f, dt);
  auto kc = rand_normal(size_t(s.B * Tmax * s.NKV * s.HD), ctx.seed, 12, 1.f, dt);
  auto vc = rand_normal(size_t(s.B * Tmax * s.NKV * s.HD), ctx.seed, 13, 1.f, dt);
  if (lens.empty())
    for (int64_t b = 0; b < s.B; b++) lens.push_back(int32_t(std::max<int64_t>(1, Tmax - 5 * b)));
  const double scale = 1.0 / std::sqrt(double(s.HD));
  const std::vector<double> ref = decode_reference(s, q, kc, vc, lens, scale);
  Tensor tq = make(q, {s.B, s.NH, s.HD}, dt, ctx.device);
  Tensor tk = make(kc, {s.B, Tmax, s.NKV, s.HD}, dt, ctx.device), tv = make(vc, {s.B, Tmax, s.NKV, s.HD}, dt, ctx.device);
  Tensor tl = Tensor::from_blob(lens.data(), {s.B}, DType::i32, Device::cpu()).to(ctx.device);
  Tensor out = Tensor::empty({s.B, s.NH, s.HD}, dt, ctx.device);
  attention_decode(tq, tk, tv, tl, float(scale), out);
  std::vector<Check> checks{compare_terms("out", out, ref, derived_tol(dt, double(Tmax + s.HD), 2), rms(vc))};

  const S o{2, 300, 8, 2, 64};  // the interleaved call: another split count and grid
  Tensor oq = make(rand_normal(size_t(o.B * o.NH * o.HD), ctx.seed, 21, 1.f, dt), {o.B, o.NH, o.HD}, dt, ctx.device);
  Tensor ok = make(rand_normal(size_t(o.B * o.T * o.NKV * o.HD), ctx.seed, 22, 1.f, dt), {o.B, o.T, o.NKV, o.HD}, dt,
                   ctx.device);
  std::vector<int32_t> olens{300, 37};
  Tensor ol = Tensor::from_blob(olens.data(), {o.B}, DType::i32, Device::cpu()).to(ctx.device);
  Tensor oo = Tensor::empty({o.B, o.NH, o.HD}, dt, ctx.device);
  const std::vector<float> first = out.to_floats();
  bool same = true;
  for (int rep = 0; rep < 2; rep++) {
    attention_decode(oq, ok, ok, ol, 0.125f, oo);
    Tensor again = Tensor::empty({s.B, s.NH, s.HD}, dt, ctx.device);
    attention_decode(tq, tk, tv, tl, float(scale), again);
    const std::vector<float> x = again.to_floats();
    same = same && x.size() == first.size() && std::memcmp(x.data(), first.data(), x.size() * sizeof(float)) == 0;
  }
  checks.push_back({same, str("repeated calls (another shape in between) ", same ? "bit-identical" : "DIFFER")});
  return checks;
}

// lens outside [1, Tmax]: the GPU clamps them to [0, Tmax] (it cannot check them without reading them on the
// host), and a row of length 0 gives zeros. The CPU front-end rejects them instead (error_test).
std::vector<Check> decode_clamp_test(const Ctx& ctx, DType dt) {
  if (ctx.device.is_cpu()) return {Check{true, "GPU only: the CPU front-end rejects lens outside [1, Tmax]"}};
  const S s{4, 600, 8, 2, 128};
  auto q = rand_normal(size_t(s.B * s.NH * s.HD), ctx.seed, 11, 1.f, dt);
  auto kc = rand_normal(size_t(s.B * s.T * s.NKV * s.HD), ctx.seed, 12, 1.f, dt);
  auto vc = rand_normal(size_t(s.B * s.T * s.NKV * s.HD), ctx.seed, 13, 1.f, dt);
  std::vector<int32_t> lens{0, int32_t(s.T) + 7, -3, 250};
  const double scale = 1.0 / std::sqrt(double(s.HD));
  const std::vector<double> ref = decode_reference(s, q, kc, vc, lens, scale);
  Tensor tl = Tensor::from_blob(lens.data(), {s.B}, DType::i32, Device::cpu()).to(ctx.device);
  Tensor out = Tensor::empty({s.B, s.NH, s.HD}, dt, ctx.device);
  attention_decode(make(q, {s.B, s.NH, s.HD}, dt, ctx.device), make(kc, {s.B, s.T, s.NKV, s.HD}, dt, ctx.device),
                   make(vc, {s.B, s.T, s.NKV, s.HD}, dt, ctx.device), tl, float(scale), out);
  return {compare_terms("out", out, ref, derived_tol(dt, double(s.T + s.HD), 2), rms(vc))};
}

// Bad arguments raise anvil::Error naming the op (never abort).
std::vector<Check> error_test(const Ctx& ctx) {
  auto expect_error = [](const char* what, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error&) {
      return Check{true, str(what, ": anvil::Error as expected")};
    }
    return Check{false, str(what, ": no error")};
  };
  const Device d = ctx.device;
  Tensor q = make(rand_normal(4 * 6 * 64, ctx.seed, 1, 1.f, DType::f32), {1, 4, 6, 64}, DType::f32, d);
  Tensor k = make(rand_normal(4 * 4 * 64, ctx.seed, 2, 1.f, DType::f32), {1, 4, 4, 64}, DType::f32, d);
  Tensor out = Tensor::empty({1, 4, 6, 64}, DType::f32, d), lse = Tensor::empty({1, 6, 4}, DType::f32, d);
  Tensor kc = Tensor::zeros({1, 8, 2, 64}, DType::f32, d), qd = Tensor::zeros({1, 6, 64}, DType::f32, d);
  Tensor od = Tensor::empty({1, 6, 64}, DType::f32, d);
  int32_t bad_len = 9;
  Tensor lens = Tensor::from_blob(&bad_len, {1}, DType::i32, Device::cpu()).to(d);
  std::vector<Check> out_checks{
      expect_error("NH % NKV != 0", [&] { attention_fwd(q, k, k, 0.125f, out, lse); }),
      expect_error("lse shape", [&] {
        Tensor k2 = Tensor::zeros({1, 4, 2, 64}, DType::f32, d), bad = Tensor::empty({1, 4, 6}, DType::f32, d);
        attention_fwd(q, k2, k2, 0.125f, out, bad);
      }),
      expect_error("dtype mix", [&] {
        Tensor k2 = Tensor::zeros({1, 4, 2, 64}, DType::bf16, d);
        attention_fwd(q, k2, k2, 0.125f, out, lse);
      })};
  if (d.is_cpu())  // the GPU does not read lens on the host (see attention_decode.cu)
    out_checks.push_back(expect_error("lens > Tmax", [&] { attention_decode(qd, kc, kc, lens, 0.125f, od); }));
  return out_checks;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // Odd T catch the tails of the 64-query and 32-key tiles; NH/NKV covers MHA (4/4), GQA 2, 3 and 4.
  const S shapes[] = {{1, 1, 2, 1, 64},  {2, 7, 4, 2, 64},   {1, 19, 2, 1, 96},
                      {1, 130, 8, 2, 128}, {2, 65, 6, 3, 80}, {1, 257, 4, 4, 96},
                      {2, 70, 4, 2, 16},   {1, 33, 2, 1, 32}};  // small heads: fewer column groups than lanes
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (S s : shapes) {
      const double scale = 1.0 / std::sqrt(double(s.HD));
      OpCase c{"attention", shape_id("attention", dt, s)};
      c.test = [=](const Ctx& ctx) {
        Inputs in = inputs(s, ctx.seed, dt);
        return run_and_compare(ctx, s, dt, in, reference(s, in, scale), scale);
      };
      if (dt == DType::f32 && s.B * s.T * s.NH * s.HD <= 4096) {
        c.grad = [=](const Ctx& ctx) {
          Inputs in = inputs(s, ctx.seed, DType::f32);
          RefOut r = reference(s, in, scale);
          auto q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), g = to_double(in.dout);
          auto fwd = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv) {
            std::vector<double> o(q.size()), l(size_t(s.B * s.NH * s.T));
            attention_fwd_ref(qq.data(), kk.data(), vv.data(), o.data(), l.data(), s.B, s.T, s.NH, s.NKV, s.HD, scale);
            return o;
          };
          auto fd_q = finite_diff([&](const std::vector<double>& x) { return fwd(x, k, v); }, q, g);
          auto fd_k = finite_diff([&](const std::vector<double>& x) { return fwd(q, x, v); }, k, g);
          auto fd_v = finite_diff([&](const std::vector<double>& x) { return fwd(q, k, x); }, v, g);
          auto f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
          // Central differences in fp64 with h = 1e-6 err by ~1e-9 relative; 1e-6 is a safe bound.
          std::vector<Check> checks{compare("dq vs finite differences", f(r.dq), fd_q, 1e-6),
                                    compare("dk vs finite differences", f(r.dk), fd_k, 1e-6),
                                    compare("dv vs finite differences", f(r.dv), fd_v, 1e-6)};
          for (auto& ch : run_and_compare(ctx, s, DType::f32, in, r, scale)) checks.push_back(ch);
          return checks;
        };
      }
      out.push_back(c);

      OpCase dc{"attention", shape_id("attention_decode", dt, s)};
      dc.test = [=](const Ctx& ctx) { return decode_test(ctx, s, dt); };
      out.push_back(dc);
    }

  // Decode at long context, every GPU head size: lens of 1, 100 and Tmax, unequal lens in a batch, GQA groups of
  // 1, 2, 3 (a chunk of 4 heads with one unused), 4 (Llama-3 8B), 6 and 8 (two chunks), 7 (Qwen2.5-7B's 28/4).
  struct LongCase {
    S s;
    std::vector<int32_t> lens;
  };
  const LongCase longs[] = {{{3, 2048, 32, 8, 128}, {1, 100, 2048}},  // the 8B shape
                            {{2, 2048, 8, 8, 64}, {2048, 777}},
                            {{2, 2048, 4, 2, 16}, {2048, 1000}},
                            {{1, 2048, 6, 2, 80}, {1500}},
                            {{2, 2048, 16, 2, 96}, {2048, 64}},
                            {{1, 2048, 12, 2, 32}, {2047}},
                            {{2, 1000, 28, 4, 128}, {1000, 513}}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const LongCase& lc : longs) {
      std::string lens_id;
      for (int32_t n : lc.lens) lens_id += str(lens_id.empty() ? "" : ",", n);
      std::string id = shape_id("attention_decode", dt, lc.s);
      id.insert(id.size() - 1, str(",lens=", lens_id));  // attention_decode(bf16,[...],lens=1,100,2048)
      OpCase dc{"attention", id};
      dc.test = [=](const Ctx& ctx) { return decode_test(ctx, lc.s, dt, lc.lens); };
      out.push_back(dc);
    }
    OpCase cc{"attention", str("attention_decode_clamp(", dtype_name(dt), ")")};
    cc.test = [=](const Ctx& ctx) { return decode_clamp_test(ctx, dt); };
    out.push_back(cc);
  }

  OpCase ec{"attention", "attention(errors)"};
  ec.test = error_test;
  out.push_back(ec);

  // Perf: Llama-3-8B-like heads (NH 32, NKV 8, HD 64 here) at B = 8, T = 2048. Causal forward FLOPs:
  // 2 matmuls x 2 flop x B NH T^2 HD / 2; the backward does 5 matmuls instead of 2: 2.5x.
  const S big{8, 2048, 32, 8, 64};
  const DType bf = DType::bf16;
  const double fwd_flops = 4.0 * big.B * big.NH * double(big.T) * big.T * big.HD / 2;
  const double qbytes = double(big.B * big.T * big.NH * big.HD) * 2, kbytes = double(big.B * big.T * big.NKV * big.HD) * 2;
  auto big_inputs = [=](const Ctx& ctx) {
    const Shape qs{big.B, big.T, big.NH, big.HD}, ks{big.B, big.T, big.NKV, big.HD};
    std::vector<Tensor> t{make(rand_normal(size_t(big.B * big.T * big.NH * big.HD), ctx.seed, 1, 1.f, bf), qs, bf, ctx.device),
                          make(rand_normal(size_t(big.B * big.T * big.NKV * big.HD), ctx.seed, 2, 1.f, bf), ks, bf, ctx.device),
                          make(rand_normal(size_t(big.B * big.T * big.NKV * big.HD), ctx.seed, 3, 1.f, bf), ks, bf, ctx.device),
                          Tensor::empty(qs, bf, ctx.device), Tensor::empty({big.B, big.NH, big.T}, DType::f32, ctx.device)};
    return t;
  };
  OpCase pf{"attention", shape_id("attention_fwd", bf, big)};
  pf.perf = [=](const Ctx& ctx) {
    auto t = big_inputs(ctx);
    PerfResult r;
    r.us = time_us(ctx, [&] { attention_fwd(t[0], t[1], t[2], 0.125f, t[3], t[4]); });
    r.flops = fwd_flops;
    r.bytes = 2 * qbytes + 2 * kbytes;
    return r;
  };
  out.push_back(pf);
  OpCase pb{"attention", shape_id("attention_bwd", bf, big)};
  pb.perf = [=](const Ctx& ctx) {
    auto t = big_inputs(ctx);
    attention_fwd(t[0], t[1], t[2], 0.125f, t[3], t[4]);
    Tensor g = make(rand_normal(size_t(qbytes / 2), ctx.seed, 4, 1.f, bf), t[0].shape(), bf, ctx.device);
    Tensor dq = Tensor::empty(t[0].shape(), bf, ctx.device), dk = Tensor::empty(t[1].shape(), bf, ctx.device);
    Tensor dv = Tensor::empty(t[1].shape(), bf, ctx.device);
    PerfResult r;
    r.us = time_us(ctx, [&] { attention_bwd(g, t[0], t[1], t[2], t[3], t[4], 0.125f, dq, dk, dv); });
    r.flops = 2.5 * fwd_flops;
    r.bytes = 4 * qbytes + 4 * kbytes;
    return r;
  };
  out.push_back(pb);
  // Decode reads K and V of the first lens rows once: bytes = 2 (K and V) x B lens NKV HD x 2 B. Shapes: the 8B
  // heads (NH 32, NKV 8, HD 128) at B = 8, Tmax = lens = 4096; at B = 1, Tmax = lens = 2048 (a decode step at
  // 2048 tokens of context); and at B = 1, Tmax = 2048, lens = 1 (a graph captured for 2048 rows, early in the
  // generation: the time of one launch, almost no bytes).
  struct DecPerf {
    const char* name;
    S s;
    int32_t len;
  };
  const DecPerf decs[] = {{"attention_decode", {8, 4096, 32, 8, 128}, 4096},
                          {"attention_decode", {1, 2048, 32, 8, 128}, 2048},
                          {"attention_decode_len1", {1, 2048, 32, 8, 128}, 1}};
  for (const DecPerf& dp : decs) {
    const S dec = dp.s;
    const int32_t len = dp.len;
    OpCase pd{"attention", shape_id(dp.name, bf, dec)};
    pd.perf = [=](const Ctx& ctx) {
      const Shape cs{dec.B, dec.T, dec.NKV, dec.HD};
      const size_t nc = size_t(dec.B * dec.T * dec.NKV * dec.HD);
      Tensor q = make(rand_normal(size_t(dec.B * dec.NH * dec.HD), ctx.seed, 1, 1.f, bf), {dec.B, dec.NH, dec.HD}, bf,
                      ctx.device);
      Tensor kc = make(rand_normal(nc, ctx.seed, 2, 1.f, bf), cs, bf, ctx.device);
      Tensor vc = make(rand_normal(nc, ctx.seed, 3, 1.f, bf), cs, bf, ctx.device);
      std::vector<int32_t> lens(size_t(dec.B), len);
      Tensor tl = Tensor::from_blob(lens.data(), {dec.B}, DType::i32, Device::cpu()).to(ctx.device);
      Tensor o = Tensor::empty({dec.B, dec.NH, dec.HD}, bf, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { attention_decode(q, kc, vc, tl, 0.0883883f, o); });
      r.bytes = 2.0 * double(dec.B) * len * dec.NKV * dec.HD * 2;
      r.flops = 4.0 * dec.B * dec.NH * double(len) * dec.HD;
      r.shape = str("lens=", len);
      return r;
    };
    out.push_back(pd);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
