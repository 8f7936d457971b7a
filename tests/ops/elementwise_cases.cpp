#include <algorithm>
#include <climits>
#include <cmath>

#include "fp8_check.h"
#include "harness.h"
#include "kernels/elementwise/elementwise.h"

namespace anvil::test {
namespace {

constexpr DType kFloats[] = {DType::f32, DType::bf16, DType::f16};
constexpr DType kAll[] = {DType::f32,  DType::bf16,     DType::f16,     DType::e4m3fn,
                          DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz};
// Odd sizes leave tails after the 16-byte packs and the 256-thread blocks; 1 and 7 never fill a pack.
constexpr int64_t kSizes[] = {1, 7, 1000, 4099, 100003};

// Compare `out` (any float dtype) to the fp64 `ref` computed with one rounding at the end.
Check compare_out(const std::string& what, const Tensor& out, const std::vector<double>& ref, double k_len) {
  if (dtype_is_fp8(out.dtype())) return compare_fp8(what, out, ref);
  return compare(what, out, ref, derived_tol(out.dtype(), k_len, 2));
}

PerfResult perf_of(const Ctx& ctx, double bytes, const std::function<void()>& fn) {
  PerfResult r;
  r.us = time_us(ctx, fn);
  r.bytes = bytes;
  return r;
}

void add_cases(std::vector<OpCase>& out) {
  for (DType dt : kFloats)
    for (int64_t n : kSizes) {
      OpCase c{"elementwise", str("add(", dtype_name(dt), ",[", n, "])")};
      c.test = [=](const Ctx& ctx) {
        auto a = rand_normal(size_t(n), ctx.seed, 1, 1.f, dt), b = rand_normal(size_t(n), ctx.seed, 2, 1.f, dt);
        std::vector<double> ref(static_cast<size_t>(n));
        add_ref(to_double(a).data(), to_double(b).data(), ref.data(), n);
        Tensor ta = make(a, {n}, dt, ctx.device), tb = make(b, {n}, dt, ctx.device), to = Tensor::empty({n}, dt, ctx.device);
        add(ta, tb, to);
        add(ta, tb, ta);  // out aliasing a
        return std::vector<Check>{compare_out("out", to, ref, 1), compare_out("out = a", ta, ref, 1)};
      };
      if (n == 100003 && dt == DType::bf16)
        c.perf = [=](const Ctx& ctx) {  // the residual add of a [8192, 4096] activation
          const int64_t N = 8192 * 4096;
          Tensor ta = make(rand_normal(size_t(N), ctx.seed, 1, 1.f, dt), {N}, dt, ctx.device);
          Tensor tb = make(rand_normal(size_t(N), ctx.seed, 2, 1.f, dt), {N}, dt, ctx.device);
          Tensor to = Tensor::empty({N}, dt, ctx.device);
          return perf_of(ctx, 3.0 * N * dtype_size(dt), [&] { add(ta, tb, to); });
        };
      out.push_back(c);
    }
}

void add_inplace_cases(std::vector<OpCase>& out) {
  for (DType xt : kFloats)
    for (DType at : {DType::f32, xt}) {
      for (int64_t n : {int64_t(7), int64_t(4099), int64_t(100003)}) {
        const float alpha = -0.37f;
        OpCase c{"elementwise", str("add_(", dtype_name(at), "+=", dtype_name(xt), ",[", n, "],alpha=-0.37)")};
        c.test = [=](const Ctx& ctx) {
          auto acc = rand_normal(size_t(n), ctx.seed, 1, 1.f, at), x = rand_normal(size_t(n), ctx.seed, 2, 1.f, xt);
          std::vector<double> ref = to_double(acc);
          add_inplace_ref(ref.data(), to_double(x).data(), alpha, n);
          Tensor tacc = make(acc, {n}, at, ctx.device), tx = make(x, {n}, xt, ctx.device);
          add_(tacc, tx, alpha);
          return std::vector<Check>{compare_out("acc", tacc, ref, 1)};
        };
        out.push_back(c);
      }
      if (xt == DType::f32) break;  // acc f32 and acc = x's dtype are the same case
    }
}

void scale_cases(std::vector<OpCase>& out) {
  for (DType dt : kFloats)
    for (int64_t n : kSizes) {
      const float s = 0.7f;
      OpCase c{"elementwise", str("scale_(", dtype_name(dt), ",[", n, "],s=0.7)")};
      c.test = [=](const Ctx& ctx) {
        auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, dt);
        std::vector<double> ref = to_double(x);
        scale_ref(ref.data(), s, n);
        Tensor tx = make(x, {n}, dt, ctx.device);
        scale_(tx, s);
        return std::vector<Check>{compare_out("x", tx, ref, 1)};
      };
      out.push_back(c);
    }
}

// i32 positions: exact, with negative steps and one sum that wraps past INT32_MAX (as uint32 arithmetic does).
void add_int_cases(std::vector<OpCase>& out) {
  for (int64_t n : kSizes) {
    OpCase c{"elementwise", str("add_int_(i32,[", n, "])")};
    c.test = [=](const Ctx& ctx) {
      std::vector<Check> r;
      for (int32_t v : {1, -3, 2}) {
        std::vector<int32_t> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; i++) x[size_t(i)] = int32_t(i * 37 % 4099) - 2000;
        if (v == 2) x[size_t(n - 1)] = INT32_MAX;
        std::vector<int64_t> ref(x.begin(), x.end());
        add_int_ref(ref.data(), v, n);
        for (auto& e : ref) e = int64_t(int32_t(uint32_t(uint64_t(e))));  // the int32 wrap
        Tensor tx = Tensor::empty({n}, DType::i32, Device::cpu());
        std::copy(x.begin(), x.end(), tx.data<int32_t>());
        tx = tx.to(ctx.device);
        add_int_(tx, v);
        Tensor got = tx.to(Device::cpu());
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += got.data<int32_t>()[i] != ref[size_t(i)];
        r.push_back({bad == 0, str("add_int_(", v, "): ", bad, " of ", n, " differ")});
      }
      Tensor f = Tensor::zeros({4}, DType::f32, ctx.device);
      r.push_back(expect_error("add_int_ f32 x", "x of dtype i32", [&] { add_int_(f, 1); }));
      return r;
    };
    out.push_back(c);
  }
}

// Inputs over [-4, 6]: A_log = log(1..256) and below, outputs from -403 to -0.018. The tolerance allows 2 ulp
// for expf (CUDA's documented bound) on top of the output rounding.
void neg_exp_cases(std::vector<OpCase>& out) {
  const DType f32 = DType::f32;
  for (int64_t n : kSizes) {
    OpCase c{"elementwise", str("neg_exp(f32,[", n, "])")};
    c.test = [=](const Ctx& ctx) {
      auto x = rand_uniform(size_t(n), ctx.seed, 1, -4.f, 6.f, f32);
      std::vector<double> ref(static_cast<size_t>(n));
      neg_exp_ref(to_double(x).data(), ref.data(), n);
      Tensor tx = make(x, {n}, f32, ctx.device), to = Tensor::empty({n}, f32, ctx.device);
      neg_exp(tx, to);
      neg_exp(tx, tx);  // out aliasing x
      const double tol = derived_tol(f32, 4, 2);
      return std::vector<Check>{compare("out", to, ref, tol), compare("out = x", tx, ref, tol)};
    };
    out.push_back(c);
  }
}

// alpha = 1 is also checked bit for bit against acc + a * b in f32: the GPU must not fuse it into an FMA.
void addcmul_cases(std::vector<OpCase>& out) {
  const DType f32 = DType::f32;
  for (float alpha : {1.f, -0.37f})
    for (int64_t n : kSizes) {
      OpCase c{"elementwise", str("addcmul_(f32,[", n, "],alpha=", fmt_g(alpha), ")")};
      c.test = [=](const Ctx& ctx) {
        auto acc = rand_normal(size_t(n), ctx.seed, 1, 1.f, f32), a = rand_normal(size_t(n), ctx.seed, 2, 1.f, f32);
        auto b = rand_normal(size_t(n), ctx.seed, 3, 1.f, f32);
        std::vector<double> ref = to_double(acc);
        addcmul_inplace_ref(ref.data(), to_double(a).data(), to_double(b).data(), alpha, n);
        Tensor tacc = make(acc, {n}, f32, ctx.device), ta = make(a, {n}, f32, ctx.device);
        addcmul_(tacc, ta, make(b, {n}, f32, ctx.device), alpha);
        // Three roundings: alpha * a, then * b, then the add.
        std::vector<Check> r = {compare("acc", tacc, ref, derived_tol(f32, 3, 2))};
        if (alpha == 1.f) {
          const auto got = tacc.to_floats();
          int64_t bad = 0;
          for (size_t i = 0; i < got.size(); i++) {
            const float p = a[i] * b[i];
            bad += f32_bits(got[i]) != f32_bits(acc[i] + p);
          }
          r.push_back({bad == 0, str("acc == acc + fl(a * b) bit for bit: ", bad, " of ", n, " differ")});
        }
        return r;
      };
      out.push_back(c);
    }
}

// Bad arguments of the f32-only ops: each must throw anvil::Error naming the argument.
void f32_op_error_cases(std::vector<OpCase>& out) {
  OpCase c{"elementwise", "neg_exp/addcmul_(errors)"};
  c.test = [](const Ctx& ctx) {
    auto T = [&](Shape s, DType dt) { return Tensor::zeros(s, dt, ctx.device); };
    Tensor x = T({4, 8}, DType::f32), y = T({4, 8}, DType::f32), z = T({4, 8}, DType::f32), none;
    Tensor h = T({4, 8}, DType::bf16), x7 = T({7}, DType::f32), xt = T({8, 4}, DType::f32).transpose(0, 1);
    return std::vector<Check>{
        expect_error("neg_exp bf16 x", "x of dtype f32", [&] { neg_exp(h, y); }),
        expect_error("neg_exp bf16 out", "out of dtype f32", [&] { neg_exp(x, h); }),
        expect_error("neg_exp out size", "out with 32 elements", [&] { neg_exp(x, x7); }),
        expect_error("neg_exp strided x", "x contiguous", [&] { neg_exp(xt, y); }),
        expect_error("neg_exp undefined out", "out to be a tensor", [&] { neg_exp(x, none); }),
        expect_error("addcmul_ bf16 acc", "acc of dtype f32", [&] { addcmul_(h, x, y); }),
        expect_error("addcmul_ bf16 b", "b of dtype f32", [&] { addcmul_(z, x, h); }),
        expect_error("addcmul_ a size", "a with 32 elements", [&] { addcmul_(z, x7, y); }),
        expect_error("addcmul_ strided b", "b contiguous", [&] { addcmul_(z, x, xt); }),
        expect_error("addcmul_ alpha inf", "finite alpha", [&] { addcmul_(z, x, y, INFINITY); })};
  };
  out.push_back(c);
}

// Every pair of float dtypes. Scales: an FP8 source is dequantised (x2); a float source into FP8 is
// quantised with 1/128, so N(0,1) inputs reach past 240 and 448 (the e4m3 maxima) and saturation is tested;
// float -> float divides by 0.75 (a reciprocal that is not exact in binary).
void cast_cases(std::vector<OpCase>& out) {
  for (DType st : kAll)
    for (DType dt : kAll)
      for (int64_t n : {int64_t(7), int64_t(4099)}) {
        const float scale = dtype_is_fp8(st) ? 2.f : dtype_is_fp8(dt) ? 1.f / 128 : 0.75f;
        OpCase c{"elementwise", str("cast(", dtype_name(st), "->", dtype_name(dt), ",[", n, "],scale=",
                                    fmt_g(scale), ")")};
        c.test = [=](const Ctx& ctx) {
          auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, st);
          std::vector<double> ref(static_cast<size_t>(n));
          cast_ref(to_double(x).data(), ref.data(), scale, dtype_is_fp8(st), n);
          Tensor tx = make(x, {n}, st, ctx.device), ty = Tensor::empty({n}, dt, ctx.device);
          cast(tx, ty, scale);
          return std::vector<Check>{compare_out("dst", ty, ref, 1)};
        };
        out.push_back(c);
      }
  // Copy bandwidth (the ceiling the other memory-bound ops are measured against) and FP8 quantisation.
  for (DType dt : {DType::bf16, DType::e4m3fn}) {
    OpCase c{"elementwise", str("cast(bf16->", dtype_name(dt), ",[8192,14336])")};
    c.perf = [=](const Ctx& ctx) {
      const int64_t N = int64_t(8192) * 14336;
      Tensor tx = make(rand_normal(size_t(N), ctx.seed, 1, 1.f, DType::bf16), {N}, DType::bf16, ctx.device);
      Tensor ty = Tensor::empty({N}, dt, ctx.device);
      return perf_of(ctx, double(N) * (2 + dtype_size(dt)), [&] { cast(tx, ty, 1.f); });
    };
    out.push_back(c);
  }
}

void reduction_cases(std::vector<OpCase>& out) {
  for (DType dt : kFloats)
    for (int64_t n : kSizes) {
      OpCase c{"elementwise", str("sum_squares(", dtype_name(dt), ",[", n, "])")};
      c.test = [=](const Ctx& ctx) {
        auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, dt);
        const float start = 3.25f;  // out accumulates: start non-zero
        std::vector<double> ref = {start};
        sum_squares_ref(to_double(x).data(), ref.data(), n);
        Tensor tx = make(x, {n}, dt, ctx.device), to = make({start}, {1}, DType::f32, ctx.device);
        sum_squares(tx, to);
        return std::vector<Check>{compare("out", to, ref, derived_tol(DType::f32, double(n), 2))};
      };
      if (n == 100003 && dt == DType::f32)
        c.perf = [=](const Ctx& ctx) {  // the gradient norm of a 64M-parameter shard
          const int64_t N = int64_t(64) << 20;
          Tensor tx = make(rand_normal(size_t(N), ctx.seed, 1, 1.f, dt), {N}, dt, ctx.device);
          Tensor to = Tensor::zeros({1}, DType::f32, ctx.device);
          return perf_of(ctx, double(N) * dtype_size(dt), [&] { sum_squares(tx, to); });
        };
      out.push_back(c);

      OpCase m{"elementwise", str("amax(", dtype_name(dt), ",[", n, "])")};
      m.test = [=](const Ctx& ctx) {
        auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, dt);
        std::vector<double> ref(1);
        amax_ref(to_double(x).data(), ref.data(), n);
        Tensor tx = make(x, {n}, dt, ctx.device), to = make({-1.f}, {1}, DType::f32, ctx.device);
        amax(tx, to);
        std::vector<Check> r = {compare("out", to, ref, derived_tol(DType::f32, 1, 2))};
        if (n > 1) {  // one NaN anywhere makes the result NaN
          x[size_t(n / 2)] = NAN;
          Tensor tn = make(x, {n}, dt, ctx.device);
          amax(tn, to);
          r.push_back({std::isnan(to.item()), str("amax with a NaN at [", n / 2, "] = ", to.item())});
        }
        return r;
      };
      out.push_back(m);
    }
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  add_cases(out);
  add_inplace_cases(out);
  scale_cases(out);
  add_int_cases(out);
  neg_exp_cases(out);
  addcmul_cases(out);
  f32_op_error_cases(out);
  cast_cases(out);
  reduction_cases(out);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
