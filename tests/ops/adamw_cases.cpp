#include <cmath>
#include <cstring>

#include "harness.h"
#include "kernels/adamw/adamw.h"
#include "kernels/elementwise/elementwise.h"

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

// ---- multi-tensor forms ------------------------------------------------------------------------------
// One tensor of a list: its size, the dtype of its param_out (f32 = none) and its weight decay.
struct Spec {
  int64_t n;
  DType out;
  float wd;
};

// A zeroed f32/bf16/f16 (n) tensor; misaligned: 1 element past an aligned allocation (4 or 2 bytes), so the GPU
// kernels take their scalar path.
Tensor alloc(int64_t n, DType dt, Device d, bool misaligned) {
  if (!misaligned) return Tensor::zeros({n}, dt, d);
  return Tensor::zeros({n + 1}, dt, d).slice(0, 1, n + 1);
}
Tensor filled(const std::vector<float>& v, DType dt, Device d, bool misaligned) {
  Tensor t = alloc(int64_t(v.size()), dt, d, misaligned);
  t.copy_(make(v, {int64_t(v.size())}, dt, Device::cpu()));
  return t;
}

// Bitwise equality of two tensors' values (exact f32 images of every dtype here).
Check same_bits(const std::string& what, const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  for (size_t i = 0; i < x.size(); i++)
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0)
      return {false, str(what, ": differs at [", i, "]: ", x[i], " vs ", y[i])};
  return {true, str(what, ": bit-identical (", x.size(), " elements)")};
}

// Three steps of adamw_step_multi over the list against (1) adamw_step_ref per tensor and (2) adamw_step per
// tensor on the same backend, which it must match to the bit.
std::vector<Check> run_multi(const Ctx& ctx, const std::vector<Spec>& specs, bool misaligned) {
  const Device d = ctx.device;
  struct State {
    Tensor p, m, v, out;
    std::vector<double> rp, rm, rv;
  };
  std::vector<State> multi(specs.size()), single(specs.size());
  for (size_t i = 0; i < specs.size(); i++) {
    const int64_t n = specs[i].n;
    auto p0 = rand_uniform(size_t(n), ctx.seed, 100 * i + 1, -1.f, 1.f, DType::f32);
    auto m0 = rand_normal(size_t(n), ctx.seed, 100 * i + 2, 0.1f, DType::f32);
    auto v0 = rand_uniform(size_t(n), ctx.seed, 100 * i + 3, 0.f, 0.02f, DType::f32);
    for (auto* st : {&multi[i], &single[i]}) {
      st->p = filled(p0, DType::f32, d, misaligned);
      st->m = filled(m0, DType::f32, d, misaligned);
      st->v = filled(v0, DType::f32, d, misaligned);
      if (specs[i].out != DType::f32) st->out = alloc(n, specs[i].out, d, misaligned);
    }
    multi[i].rp = to_double(p0);
    multi[i].rm = to_double(m0);
    multi[i].rv = to_double(v0);
  }
  for (int k = 0; k < kSteps; k++) {
    AdamWParams p = params(kFirstStep + k);
    p.weight_decay = 0;
    std::vector<AdamWTensor> ts;
    std::vector<std::vector<float>> gs;
    for (size_t i = 0; i < specs.size(); i++) {
      gs.push_back(rand_normal(size_t(specs[i].n), ctx.seed, 100 * i + 10 + k, 1.f, DType::f32));
      Tensor g = filled(gs.back(), DType::f32, d, misaligned);
      ts.push_back({multi[i].p, g, multi[i].m, multi[i].v, multi[i].out, specs[i].wd});
      AdamWParams q = p;
      q.weight_decay = specs[i].wd;
      adamw_step(single[i].p, g, single[i].m, single[i].v, q, single[i].out);
      adamw_step_ref(multi[i].rp.data(), to_double(gs.back()).data(), multi[i].rm.data(), multi[i].rv.data(),
                     specs[i].n, q.lr, q.beta1, q.beta2, q.eps, q.weight_decay, q.step, q.grad_scale);
    }
    adamw_step_multi(ts, p);
  }
  // Tolerances as run(): three chained steps of ~5 f32 roundings each.
  std::vector<Check> out;
  for (size_t i = 0; i < specs.size(); i++) {
    const std::string t = str("ts[", i, "] (n=", specs[i].n, ") ");
    const State &a = multi[i], &b = single[i];
    out.push_back(compare(t + "param", a.p, a.rp, derived_tol(DType::f32, 15, 2)));
    out.push_back(compare(t + "m", a.m, a.rm, derived_tol(DType::f32, 15, 2)));
    out.push_back(compare(t + "v", a.v, a.rv, derived_tol(DType::f32, 15, 2)));
    if (a.out.defined()) out.push_back(compare(t + "param_out", a.out, a.rp, derived_tol(specs[i].out, 15, 2)));
    out.push_back(same_bits(t + "param vs adamw_step", a.p, b.p));
    out.push_back(same_bits(t + "m vs adamw_step", a.m, b.m));
    out.push_back(same_bits(t + "v vs adamw_step", a.v, b.v));
    if (a.out.defined()) out.push_back(same_bits(t + "param_out vs adamw_step", a.out, b.out));
  }
  return out;
}

// grad_sum_squares_multi over the list against grad_sum_squares_ref; repeated calls give the same bits, a NaN
// or an inf in the last tensor reaches the result, and on the CPU the sum equals sum_squares per tensor.
std::vector<Check> run_sum_squares(const Ctx& ctx, const std::vector<int64_t>& sizes, bool misaligned) {
  const Device d = ctx.device;
  const float start = 3.25f;  // out accumulates: start non-zero
  std::vector<std::vector<float>> host;
  std::vector<std::vector<double>> ref_in;
  std::vector<Tensor> xs;
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    host.push_back(rand_normal(size_t(sizes[i]), ctx.seed, 200 + i, 1.f, DType::f32));
    ref_in.push_back(to_double(host.back()));
    xs.push_back(filled(host.back(), DType::f32, d, misaligned));
    total += sizes[i];
  }
  std::vector<double> ref = {start};
  grad_sum_squares_ref(ref_in, ref.data());
  Tensor o1 = make({start}, {1}, DType::f32, d), o2 = make({start}, {1}, DType::f32, d);
  grad_sum_squares_multi(xs, o1);
  grad_sum_squares_multi(xs, o2);
  std::vector<Check> out = {compare("out", o1, ref, derived_tol(DType::f32, double(total), 2)),
                            same_bits("a second call", o2, o1)};
  if (d.is_cpu()) {
    Tensor o3 = make({start}, {1}, DType::f32, d);
    for (const Tensor& x : xs)
      if (x.numel() > 0) sum_squares(x, o3);
    out.push_back(same_bits("sum_squares per tensor", o1, o3));
  }
  if (sizes.back() > 0) {
    for (float bad : {NAN, INFINITY}) {
      std::vector<float> h = host.back();
      h[h.size() / 2] = bad;
      std::vector<Tensor> ys = xs;
      ys.back() = filled(h, DType::f32, d, misaligned);
      Tensor o = make({start}, {1}, DType::f32, d);
      grad_sum_squares_multi(ys, o);
      const float r = o.item();
      out.push_back({std::isnan(bad) ? std::isnan(r) : r == INFINITY, str(std::isnan(bad) ? "a NaN" : "an inf", " in the last tensor: ", r)});
    }
  }
  return out;
}

// zero_multi over tensors of mixed dtypes and sizes (across the GPU kernel's 64 KB chunks), each the inside of a
// buffer one element longer at both ends: the insides must read zero, the guard elements keep their values.
// misaligned: the insides start 2 or 4 bytes past an aligned allocation (the kernel's byte path).
std::vector<Check> run_zero(const Ctx& ctx, const std::vector<int64_t>& sizes, bool misaligned) {
  const Device d = ctx.device;
  const DType cycle[3] = {DType::f32, DType::bf16, DType::f16};
  std::vector<Tensor> bufs, xs;
  for (size_t i = 0; i < sizes.size(); i++) {
    const int64_t n = sizes[i], pad = misaligned ? 1 : 8;  // 8 elements keep 16-byte alignment for every dtype
    const auto v = rand_uniform(size_t(n + 2 * pad), ctx.seed, 300 + i, 1.f, 2.f, DType::f32);
    bufs.push_back(make(v, {n + 2 * pad}, cycle[i % 3], d));
    xs.push_back(bufs.back().slice(0, pad, pad + n));
  }
  zero_multi(xs);
  std::vector<Check> out;
  for (size_t i = 0; i < sizes.size(); i++) {
    const auto v = bufs[i].to_floats();
    const int64_t n = sizes[i], pad = misaligned ? 1 : 8;
    int64_t nonzero = 0, guard_bad = 0;
    for (int64_t k = 0; k < n + 2 * pad; k++) {
      const bool inside = k >= pad && k < pad + n;
      if (inside && v[size_t(k)] != 0.f) nonzero++;
      if (!inside && !(v[size_t(k)] >= 1.f && v[size_t(k)] <= 2.f)) guard_bad++;
    }
    out.push_back({nonzero == 0 && guard_bad == 0,
                   str("xs[", i, "] (", dtype_name(cycle[i % 3]), ", n=", n, "): ", nonzero, " non-zero inside, ",
                       guard_bad, " guard elements changed")});
  }
  return out;
}

// Each call must throw an Error whose message names `names` (the tensor's index in the list).
std::vector<Check> multi_error_test(const Ctx& ctx) {
  const Device d = ctx.device;
  auto z = [&](int64_t n, DType dt = DType::f32) { return Tensor::zeros({n}, dt, d); };
  // Another device: a host buffer labelled gpu0 when the backend is the CPU (the device check rejects it before
  // anything reads it), host memory when the backend is a GPU.
  std::vector<float> host(8, 0.f);
  Tensor other = d.is_cpu() ? Tensor::from_blob(host.data(), {8}, DType::f32, Device::gpu(0))
                             : Tensor::zeros({8}, DType::f32);
  auto list = [&] {
    std::vector<AdamWTensor> ts;
    for (int64_t n : {8, 5, 8}) ts.push_back({z(n), z(n), z(n), z(n), Tensor(), 0.f});
    return ts;
  };
  AdamWParams p = params(1);
  p.weight_decay = 0;
  auto expect_error = [&](const char* what, const std::string& names, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      const std::string msg = e.what();
      return Check{msg.find(names) != std::string::npos, str(what, ": ", msg)};
    }
    return Check{false, str(what, ": no error")};
  };
  std::vector<Check> out = {
      expect_error("empty list", "at least one tensor", [&] {
        std::vector<AdamWTensor> ts;
        adamw_step_multi(ts, p);
      }),
      expect_error("grad of another size", "ts[1].grad", [&] {
        auto ts = list();
        ts[1].grad = z(7);
        adamw_step_multi(ts, p);
      }),
      expect_error("bf16 param", "ts[2].param", [&] {
        auto ts = list();
        ts[2].param = z(8, DType::bf16);
        adamw_step_multi(ts, p);
      }),
      expect_error("f32 param_out", "ts[0].param_out", [&] {
        auto ts = list();
        ts[0].param_out = z(8);
        adamw_step_multi(ts, p);
      }),
      expect_error("param_out of another size", "ts[2].param_out", [&] {
        auto ts = list();
        ts[2].param_out = z(9, DType::bf16);
        adamw_step_multi(ts, p);
      }),
      expect_error("a tensor on another device", "ts[2].param", [&] {
        auto ts = list();
        ts[2] = {other, other, other, other, Tensor(), 0.f};
        adamw_step_multi(ts, p);
      }),
      expect_error("negative weight decay", "ts[1].weight_decay", [&] {
        auto ts = list();
        ts[1].weight_decay = -0.1f;
        adamw_step_multi(ts, p);
      }),
      expect_error("AdamWParams::weight_decay set", "weight_decay = 0", [&] {
        auto ts = list();
        adamw_step_multi(ts, params(1));
      }),
      expect_error("sum of squares: empty list", "at least one tensor", [&] {
        Tensor o = z(1);
        grad_sum_squares_multi({}, o);
      }),
      expect_error("sum of squares: f16 tensor", "xs[1]", [&] {
        Tensor o = z(1);
        grad_sum_squares_multi({z(4), z(4, DType::f16)}, o);
      }),
      expect_error("sum of squares: strided tensor", "xs[0]", [&] {
        Tensor o = z(1);
        grad_sum_squares_multi({Tensor::zeros({4, 3}, DType::f32, d).transpose(0, 1)}, o);
      }),
      expect_error("sum of squares: tensor on another device", "xs[1]", [&] {
        Tensor o = z(1);
        grad_sum_squares_multi({z(4), other}, o);
      }),
      expect_error("sum of squares: out of shape [2]", "out", [&] {
        Tensor o = z(2);
        grad_sum_squares_multi({z(4)}, o);
      }),
      expect_error("zero: empty list", "at least one tensor", [&] { zero_multi({}); }),
      expect_error("zero: strided tensor", "xs[1]", [&] {
        zero_multi({z(4), Tensor::zeros({4, 3}, DType::f32, d).transpose(0, 1)});
      }),
      expect_error("zero: tensor on another device", "xs[1]", [&] { zero_multi({z(4), other}); })};
  return out;
}

std::string sizes_str(const std::vector<Spec>& specs) {
  std::string s;
  for (const Spec& sp : specs) s += (s.empty() ? "" : ",") + std::to_string(sp.n);
  return "[" + s + "]";
}

// The parameter sizes of Mamba-130m (24 layers x 10 tensors, the tied embedding, the final norm: 242 tensors,
// 129M parameters), the list the optimizer hands the multi-tensor ops in its training runs.
std::vector<int64_t> mamba130m_sizes() {
  std::vector<int64_t> sizes = {50280 * 768, 768};
  // Per layer: in_proj, conv1d weight and bias, x_proj, dt_proj weight and bias, A_log, D, out_proj, norm.
  for (int l = 0; l < 24; l++)
    for (int64_t n : {768 * 3072, 1536 * 4, 1536, 80 * 1536, 1536 * 48, 1536, 1536 * 16, 1536, 768 * 1536, 768})
      sizes.push_back(n);
  return sizes;
}

void multi_cases(std::vector<OpCase>& out) {
  // Sizes around the 4-wide path and its tail, and across the GPU kernels' chunks (16384 elements per AdamW
  // block, 32768 per sum-of-squares block); an empty tensor in the middle owns no block.
  const std::vector<std::vector<int64_t>> lists = {
      {1}, {7}, {1000}, {4099}, {1, 7, 1000, 4099, 0, 65537, 33, 16384, 16385, 32769}};
  const DType kNone = DType::f32;
  for (const auto& sizes : lists) {
    for (int mode = 0; mode < 4; mode++) {  // param_out: none, bf16, f16, mixed (none / bf16 / f16 in turn)
      std::vector<Spec> specs;
      for (size_t i = 0; i < sizes.size(); i++) {
        const DType cycle[3] = {kNone, DType::bf16, DType::f16};
        const DType o = mode == 3 ? cycle[i % 3] : cycle[mode];
        specs.push_back({sizes[i], o, i % 2 == 0 ? 0.1f : 0.f});  // decay on every other tensor
      }
      const char* names[4] = {"none", "bf16", "f16", "mixed"};
      for (bool mis : {false, true}) {
        if (mis && sizes.size() == 1) continue;  // the long list covers the scalar path
        OpCase c{"adamw",
                 str("adamw_step_multi(out=", names[mode], ",", sizes_str(specs), mis ? ",misaligned" : "", ")")};
        c.test = [=](const Ctx& ctx) { return run_multi(ctx, specs, mis); };
        out.push_back(c);
      }
    }
  }
  // Eleven distinct weight decays: two GPU launches (8 per launch), each tensor's decay from its own slot.
  std::vector<Spec> many;
  for (int i = 0; i < 11; i++) many.push_back({int64_t(100 + 37 * i), i % 2 ? DType::bf16 : kNone, 0.01f * float(i)});
  OpCase c{"adamw", str("adamw_step_multi(out=mixed,", sizes_str(many), ",11 weight decays)")};
  c.test = [=](const Ctx& ctx) { return run_multi(ctx, many, false); };
  // Perf: Mamba-130m's list, bf16 compute copies and decay on the matrices; bytes as adamw's perf case.
  c.perf = [=](const Ctx& ctx) {
    const std::vector<int64_t> sizes = mamba130m_sizes();
    std::vector<AdamWTensor> ts;
    double bytes = 0;
    for (size_t i = 0; i < sizes.size(); i++) {
      const int64_t n = sizes[i];
      const bool big = n >= 768 * 768;
      ts.push_back({make(rand_uniform(size_t(n), ctx.seed, 1, -1.f, 1.f, DType::f32), {n}, DType::f32, ctx.device),
                    make(rand_normal(size_t(n), ctx.seed, 2, 1.f, DType::f32), {n}, DType::f32, ctx.device),
                    Tensor::zeros({n}, DType::f32, ctx.device), Tensor::zeros({n}, DType::f32, ctx.device),
                    big ? Tensor::empty({n}, DType::bf16, ctx.device) : Tensor(), big ? 0.1f : 0.f});
      bytes += double(n) * (7 * 4 + (big ? 2 : 0));
    }
    AdamWParams p = params(1);
    p.weight_decay = 0;
    PerfResult r;
    r.us = time_us(ctx, [&] {
      adamw_step_multi(ts, p);
      p.step++;
    });
    r.bytes = bytes;
    r.shape = str("[", sizes.size(), " tensors]");
    return r;
  };
  out.push_back(c);

  for (const auto& sizes : lists)
    for (bool mis : {false, true}) {
      if (mis && sizes.size() == 1) continue;
      std::string s;
      for (int64_t n : sizes) s += (s.empty() ? "" : ",") + std::to_string(n);
      OpCase q{"adamw", str("grad_sum_squares_multi([", s, "]", mis ? ",misaligned" : "", ")")};
      q.test = [=](const Ctx& ctx) { return run_sum_squares(ctx, sizes, mis); };
      if (sizes.size() > 1 && !mis)
        q.perf = [](const Ctx& ctx) {  // Mamba-130m's gradients: each read once
          std::vector<Tensor> xs;
          double bytes = 0;
          for (int64_t n : mamba130m_sizes()) {
            xs.push_back(make(rand_normal(size_t(n), ctx.seed, 1, 1.f, DType::f32), {n}, DType::f32, ctx.device));
            bytes += 4.0 * double(n);
          }
          Tensor o = Tensor::zeros({1}, DType::f32, ctx.device);
          PerfResult r;
          r.us = time_us(ctx, [&] { grad_sum_squares_multi(xs, o); });
          r.bytes = bytes;
          r.shape = str("[", xs.size(), " tensors]");
          return r;
        };
      out.push_back(q);
    }
  const std::vector<int64_t> zsizes = {1, 7, 1000, 0, 16385, 32769, 65537};  // 32769 f16, 65537 f32: 2 and 4 bytes past whole 64 KB chunks
  for (bool mis : {false, true}) {
    OpCase zc{"adamw", str("zero_multi([1,7,1000,0,16385,32769,65537]", mis ? ",misaligned" : "", ")")};
    zc.test = [=](const Ctx& ctx) { return run_zero(ctx, zsizes, mis); };
    if (!mis)
      zc.perf = [](const Ctx& ctx) {  // Mamba-130m's gradients: each written once
        std::vector<Tensor> xs;
        double bytes = 0;
        for (int64_t n : mamba130m_sizes()) {
          xs.push_back(Tensor::empty({n}, DType::f32, ctx.device));
          bytes += 4.0 * double(n);
        }
        PerfResult r;
        r.us = time_us(ctx, [&] { zero_multi(xs); });
        r.bytes = bytes;
        r.shape = str("[", xs.size(), " tensors]");
        return r;
      };
    out.push_back(zc);
  }
  OpCase ec{"adamw", "adamw_step_multi(errors)"};
  ec.test = multi_error_test;
  out.push_back(ec);
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
  multi_cases(out);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
