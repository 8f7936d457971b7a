// quantize cases: dynamic per-token and static per-tensor FP8 quantisation (e4m3fn, e4m3fnuz) from f32/bf16/f16,
// dequantisation, and the e4m3 codec itself against core/dtype.h's generic one and the fp64 rounding spec.
//
// Codes are compared exactly with the fp64 reference q = fp8(x / scale), except where x / scale lies within a
// relative 2^-20 of a rounding boundary: the kernels round 1/scale and x * (1/scale) to f32 first (a few f32 ulps,
// 2^-24 each), so there either neighbour is right. Scales: one f32 rounding of amax / fp8_max, so
// derived_tol(f32, 1, 2). Dequantised values: one rounding into y's dtype, derived_tol(y, 1, 2).
#include <cmath>

#include "harness.h"
#include "kernels/quantize/fp8_e4m3.h"
#include "kernels/quantize/quantize.h"

namespace anvil::test {
namespace {

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

Check compare_codes(const std::string& what, const std::vector<float>& q, const std::vector<double>& v, DType t) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < q.size(); i++) {
    const bool ok = same(q[i], fp8_round_ref(v[i], t)) || same(q[i], fp8_round_ref(v[i] * (1 - 0x1p-20), t)) ||
                    same(q[i], fp8_round_ref(v[i] * (1 + 0x1p-20), t));
    if (!ok && bad++ == 0) first = i;
  }
  Check c{bad == 0, str(what, ": ", bad, " of ", q.size(), " codes differ from the fp64 rounding")};
  if (bad) c.detail += str(" (first at [", first, "]: got ", q[first], " for x/scale = ", v[first], ", expected ",
                           fp8_round_ref(v[first], t), ")");
  return c;
}

std::vector<Check> run_per_token(const Ctx& ctx, DType xd, DType qd, Shape shape) {
  const int64_t K = shape.back(), n = shape_numel(shape), M = n / K;
  auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, xd);
  if (M > 1)  // one all-zero row: the 2^-126 scale floor must give zero codes, not NaN
    for (int64_t k = 0; k < K; k++) x[size_t(K + k)] = 0.f;
  Tensor tx = make(x, shape, xd, ctx.device), tq = Tensor::empty(shape, qd, ctx.device);
  Tensor ts = Tensor::empty({M}, DType::f32, ctx.device);
  quantize_fp8_per_token(tx, tq, ts);
  std::vector<double> xr = to_double(x), rq(static_cast<size_t>(n)), rs(static_cast<size_t>(M)), v(xr.size());
  quantize_fp8_per_token_ref(xr.data(), rq.data(), rs.data(), M, K, qd);
  for (int64_t i = 0; i < n; i++) v[size_t(i)] = xr[size_t(i)] / rs[size_t(i / K)];
  // Round trip through the device's dequantise, into f32: within one fp8 rounding of x.
  Tensor ty = Tensor::empty(shape, DType::f32, ctx.device);
  dequantize_fp8(tq, ts, ty);
  return {compare("scale", ts, rs, derived_tol(DType::f32, 1, 2)), compare_codes("q", tq.to_floats(), v, qd),
          compare("dequantised", ty, xr, derived_tol(qd, 1, 2))};
}

std::vector<Check> run_per_tensor(const Ctx& ctx, DType xd, DType qd, Shape shape) {
  const int64_t n = shape_numel(shape);
  auto x = rand_normal(size_t(n), ctx.seed, 1, 1.f, xd);
  // |x| above 2.5 (about 1% of a unit normal) saturates at fp8_max.
  const float scale = 2.5f / fp8_max(qd);
  Tensor tx = make(x, shape, xd, ctx.device), tq = Tensor::empty(shape, qd, ctx.device);
  Tensor ts = make({scale}, {1}, DType::f32, ctx.device);
  quantize_fp8_per_tensor(tx, ts, tq);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) v[size_t(i)] = double(x[size_t(i)]) / double(scale);
  return {compare_codes("q", tq.to_floats(), v, qd)};
}

std::vector<Check> run_dequant(const Ctx& ctx, DType qd, DType yd, int64_t M, int64_t K, bool per_row) {
  auto q = rand_normal(size_t(M * K), ctx.seed, 1, 30.f, qd);  // codes over most of the e4m3 range
  auto s = per_row ? rand_uniform(size_t(M), ctx.seed, 2, 1e-3f, 1e-1f, DType::f32) : std::vector<float>{0.0371f};
  Tensor tq = make(q, {M, K}, qd, ctx.device), ts = make(s, {int64_t(s.size())}, DType::f32, ctx.device);
  Tensor ty = Tensor::empty({M, K}, yd, ctx.device);
  dequantize_fp8(tq, ts, ty);
  std::vector<double> ry(size_t(M * K));
  dequantize_fp8_ref(to_double(q).data(), to_double(s).data(), per_row, ry.data(), M, K);
  return {compare("y", ty, ry, derived_tol(yd, 1, 2))};
}

// The fast codec against core/dtype.h's generic one (bytes) and the fp64 spec (values): all 256 codes decoded;
// f32 inputs every 997th bit pattern (4.3M, all binades and signs) plus every fp8 rounding boundary and its f32
// neighbours (ties to even, saturation at fp8_max, subnormals).
std::vector<Check> run_codec(DType t) {
  const bool fnuz = t == DType::e4m3fnuz;
  const Fp8Format f = fp8_format(t);
  size_t bad_dec = 0, bad_enc = 0, bad_val = 0;
  std::string first;
  for (int b = 0; b < 256; b++)
    if (!same(e4m3_decode(uint8_t(b), fnuz), fp8_to_f32(uint8_t(b), f)) && bad_dec++ == 0)
      first = str("decode ", b, ": ", e4m3_decode(uint8_t(b), fnuz));
  auto check = [&](float v) {
    const uint8_t got = e4m3_encode(v, fnuz), want = f32_to_fp8(v, f);
    if (got != want && bad_enc++ == 0) first = str("encode ", v, ": ", int(got), " vs dtype.h ", int(want));
    if (!same(fp8_to_f32(got, f), fp8_round_ref(double(v), t)) && bad_val++ == 0)
      first = str("encode ", v, ": ", fp8_to_f32(got, f), " vs fp64 ", fp8_round_ref(double(v), t));
  };
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 997) check(bits_f32(uint32_t(u)));
  for (int b = 0; b < 127; b++) {  // boundaries between consecutive non-negative codes, and past the largest
    const float lo = fp8_to_f32(uint8_t(b), f), hi = fp8_to_f32(uint8_t(b + 1), f);
    if (std::isnan(hi)) continue;
    const float mid = (lo + hi) / 2;  // exact: 4 significant bits
    for (float v : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e30f), lo, hi})
      for (float sgn : {1.f, -1.f}) check(sgn * v);
  }
  for (float v : {f.max, f.max * 1.03125f, f.max * 1.0625f, f.max * 1.1f, INFINITY, -INFINITY, NAN, 0.f, -0.f})
    check(v);
  return {Check{bad_dec == 0 && bad_enc == 0 && bad_val == 0,
                str("decode mismatches ", bad_dec, ", encode byte mismatches ", bad_enc, ", value mismatches ",
                    bad_val, first.empty() ? "" : str(" (first: ", first, ")"))}};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  const Shape shapes[] = {{1, 7}, {3, 100}, {16, 4096}, {5, 1000}, {2, 8200}, {2, 3, 64}, {4, 333}};
  for (DType qd : {DType::e4m3fn, DType::e4m3fnuz})
    for (DType xd : {DType::f32, DType::bf16, DType::f16})
      for (const Shape& s : shapes) {
        OpCase c{"quantize", str("quantize_fp8_per_token(", dtype_name(xd), "->", dtype_name(qd), ",", shape_str(s), ")")};
        c.test = [=](const Ctx& ctx) { return run_per_token(ctx, xd, qd, s); };
        out.push_back(c);
        OpCase d{"quantize", str("quantize_fp8_per_tensor(", dtype_name(xd), "->", dtype_name(qd), ",", shape_str(s), ")")};
        d.test = [=](const Ctx& ctx) { return run_per_tensor(ctx, xd, qd, s); };
        out.push_back(d);
      }
  struct D { int64_t M, K; bool per_row; };
  for (DType qd : {DType::e4m3fn, DType::e4m3fnuz})
    for (DType yd : {DType::f32, DType::bf16, DType::f16})
      for (D d : {D{1, 7, false}, D{5, 1000, true}, D{16, 4096, true}, D{3, 333, true}, D{64, 256, false}}) {
        OpCase c{"quantize", str("dequantize_fp8(", dtype_name(qd), "->", dtype_name(yd), ",", shape_str({d.M, d.K}),
                                 d.per_row ? ",per_row)" : ",per_tensor)")};
        c.test = [=](const Ctx& ctx) { return run_dequant(ctx, qd, yd, d.M, d.K, d.per_row); };
        out.push_back(c);
      }
  for (DType t : {DType::e4m3fn, DType::e4m3fnuz}) {
    OpCase c{"quantize", str("e4m3_codec(", dtype_name(t), ")")};
    c.test = [=](const Ctx&) { return run_codec(t); };
    out.push_back(c);
  }

  // Perf: prefill-sized rows (bandwidth) and decode-sized rows (latency), bf16 in, e4m3fn codes.
  for (int64_t M : {1, 16, 8192}) {
    const int64_t K = 4096;
    OpCase c{"quantize", str("quantize_fp8_per_token_perf(bf16->e4m3fn,", shape_str({M, K}), ")")};
    c.perf = [=](const Ctx& ctx) {
      Tensor x = make(rand_normal(size_t(M * K), ctx.seed, 1, 1.f, DType::bf16), {M, K}, DType::bf16, ctx.device);
      Tensor q = Tensor::empty({M, K}, DType::e4m3fn, ctx.device), s = Tensor::empty({M}, DType::f32, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { quantize_fp8_per_token(x, q, s); });
      r.bytes = 3.0 * double(M * K) + 4.0 * double(M);
      return r;
    };
    out.push_back(c);
  }
  {
    const int64_t M = 8192, K = 4096;
    OpCase c{"quantize", str("quantize_fp8_per_tensor_perf(bf16->e4m3fn,", shape_str({M, K}), ")")};
    c.perf = [=](const Ctx& ctx) {
      Tensor x = make(rand_normal(size_t(M * K), ctx.seed, 1, 1.f, DType::bf16), {M, K}, DType::bf16, ctx.device);
      Tensor q = Tensor::empty({M, K}, DType::e4m3fn, ctx.device), s = make({0.01f}, {1}, DType::f32, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { quantize_fp8_per_tensor(x, s, q); });
      r.bytes = 3.0 * double(M * K);
      return r;
    };
    out.push_back(c);
    OpCase d{"quantize", str("dequantize_fp8_perf(e4m3fn->bf16,", shape_str({M, K}), ",per_row)")};
    d.perf = [=](const Ctx& ctx) {
      Tensor q = make(rand_normal(size_t(M * K), ctx.seed, 1, 30.f, DType::e4m3fn), {M, K}, DType::e4m3fn, ctx.device);
      Tensor s = make(rand_uniform(size_t(M), ctx.seed, 2, 1e-3f, 1e-1f, DType::f32), {M}, DType::f32, ctx.device);
      Tensor y = Tensor::empty({M, K}, DType::bf16, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { dequantize_fp8(q, s, y); });
      r.bytes = 3.0 * double(M * K) + 4.0 * double(M);
      return r;
    };
    out.push_back(d);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
