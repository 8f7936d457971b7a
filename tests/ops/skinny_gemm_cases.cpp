// skinny_gemm cases: y (M, N) = x (M, K) @ (w_scale * w)^T for decode row counts M in {1, 2, 4, 7, 16}, every
// weight dtype (bf16, f16, e4m3fn, e4m3fnuz), activations and outputs in f32/bf16/f16, per-tensor and per-channel
// scales. The weights are drawn already rounded to their dtype (fp8 codes included), so the reference sees exactly
// the kernel's values: only the fp32 accumulation and the output rounding err, and the tolerance is
// derived_tol(y dtype, K, 2) as for any product. Perf: the Llama-3.1-8B projections (stacked qkv and gate_up).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>

#include "harness.h"
#include "kernels/skinny_gemm/skinny_gemm.h"

namespace anvil::test {
namespace {

enum class Scale { none, per_tensor, per_channel };
const char* scale_name(Scale s) { return s == Scale::none ? "" : s == Scale::per_tensor ? ",per_tensor" : ",per_channel"; }

struct SG {
  int64_t M, N, K;
  DType x, w, y;
  Scale scale;
  // Stress: x rows scaled by powers of two from 2^-60 to 2^24 (FP8 weights on f16 MMAs stage bf16 x as f16,
  // whose range is 2^-24..65504), and NaN codes in three weight rows (their outputs must be NaN, every row's).
  bool wide = false, nan_rows = false;
  bool tiles = false;  // w also pre-tiled (skinny_gemm_tiles): the GPU's ring kernel reads that copy
  bool x16 = false;    // ANVIL_SKINNY_X16=1 (else =0): e4m3fn with bf16 x staged as f16 before the GPU's ring
};

// An environment variable set for the scope's launches (the ring reads ANVIL_SKINNY_X16 per call), the caller's
// value again on leaving.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name(name) {
    if (const char* e = std::getenv(name)) had = true, old = e;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had) setenv(name, old.c_str(), 1);
    else unsetenv(name);
  }
  const char* name;
  bool had = false;
  std::string old;
};
const char* x16_value(bool on) { return on ? "1" : "0"; }

std::string sg_id(const SG& s) {
  return str("skinny_gemm(", dtype_name(s.x), "x", dtype_name(s.w), "->", dtype_name(s.y), ",M=", s.M, ",N=", s.N,
             ",K=", s.K, scale_name(s.scale), s.wide ? ",wide_x" : "", s.nan_rows ? ",nan_w" : "",
             s.tiles ? ",tiles" : "", s.x16 ? ",x16" : "", ")");
}

std::vector<Check> run_sg(const Ctx& ctx, const SG& s) {
  auto x = rand_normal(size_t(s.M * s.K), ctx.seed, 1, 1.f, s.x);
  // fp8 weights with a spread of about 2^7 around 1 (e4m3 normals and a few subnormals), scaled back by w_scale.
  auto w = rand_normal(size_t(s.N * s.K), ctx.seed, 2, dtype_is_fp8(s.w) ? 4.f : 1.f, s.w);
  const int64_t nan_n[3] = {0, s.N / 2 + 1, s.N - 1};
  if (s.wide)
    for (int64_t m = 0; m < s.M; m++)
      for (int64_t k = 0; k < s.K; k++) {
        float& v = x[size_t(m * s.K + k)];
        v = std::ldexp(v, int(-60 + 29 * m % 85));
      }
  if (s.nan_rows)
    for (int64_t n : nan_n) w[size_t(n * s.K + (n * 37) % s.K)] = NAN;
  std::vector<float> ws;
  if (s.scale == Scale::per_tensor) ws = {0.0053f};
  if (s.scale == Scale::per_channel) ws = rand_uniform(size_t(s.N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32);
  Tensor tx = make(x, {s.M, s.K}, s.x, ctx.device), tw = make(w, {s.N, s.K}, s.w, ctx.device);
  Tensor tws = ws.empty() ? Tensor() : make(ws, {int64_t(ws.size())}, DType::f32, ctx.device);
  // Filled with garbage-like values: the kernel must overwrite every element.
  Tensor ty = make(rand_normal(size_t(s.M * s.N), ctx.seed, 4, 1e3f, s.y), {s.M, s.N}, s.y, ctx.device);
  {
    ScopedEnv stage("ANVIL_SKINNY_X16", x16_value(s.x16));
    skinny_gemm(tx, tw, tws, ty, s.tiles ? skinny_gemm_tiles(tw) : Tensor());
  }
  std::vector<double> ref(size_t(s.M * s.N)), wsd = to_double(ws);
  skinny_gemm_ref(to_double(x).data(), to_double(w).data(), ws.empty() ? nullptr : wsd.data(),
                  s.scale == Scale::per_channel, ref.data(), s.M, s.N, s.K);
  if (!s.wide && !s.nan_rows) return {compare("y", ty, ref, derived_tol(s.y, double(s.K), 2))};
  // Row by row (each against its own scale), NaN where the reference is NaN.
  std::vector<Check> out;
  const std::vector<float> got = ty.to_floats();
  int nan_wrong = 0, nan_ref = 0;
  for (int64_t m = 0; m < s.M; m++) {
    std::vector<float> g;
    std::vector<double> r;
    for (int64_t n = 0; n < s.N; n++) {
      const size_t i = size_t(m * s.N + n);
      if (std::isnan(ref[i])) nan_ref++, nan_wrong += !std::isnan(got[i]);
      else g.push_back(got[i]), r.push_back(ref[i]);
    }
    out.push_back(compare(str("y row ", m), g, r, derived_tol(s.y, double(s.K), 2)));
  }
  if (s.nan_rows) {
    Check c;
    c.ok = nan_wrong == 0 && nan_ref == 3 * s.M;  // the reference has them too: the codes were made
    c.detail = str("outputs of NaN weight rows: ", nan_ref, " NaN in the reference (", 3 * s.M, " expected), ",
                   nan_wrong, " of them not NaN");
    out.push_back(c);
  }
  return out;
}

OpCase error_case() {
  OpCase c{"skinny_gemm", "skinny_gemm(errors)"};
  c.test = [](const Ctx& ctx) {
    auto T = [&](Shape s, DType dt) { return Tensor::zeros(s, dt, ctx.device); };
    Tensor x = T({4, 32}, DType::bf16), w = T({16, 32}, DType::bf16), y = T({4, 16}, DType::bf16), none;
    Tensor w8 = T({16, 32}, DType::e4m3fn), s1 = T({1}, DType::f32);
    std::vector<Check> r;
    r.push_back(expect_error("33 rows", [&] {
      Tensor x33 = T({33, 32}, DType::bf16), y33 = T({33, 16}, DType::bf16);
      skinny_gemm(x33, w, none, y33);
    }, "M <= 32"));
    r.push_back(expect_error("K mismatch", [&] { Tensor w2 = T({16, 31}, DType::bf16); skinny_gemm(x, w2, none, y); },
                             "w (N, K) with K = 32"));
    r.push_back(expect_error("fp8 without scale", [&] { skinny_gemm(x, w8, none, y); }, "w_scale"));
    r.push_back(expect_error("w_scale shape", [&] {
      Tensor s15 = T({15}, DType::f32);
      skinny_gemm(x, w8, s15, y);
    }, "w_scale of shape [1] or [16]"));
    r.push_back(expect_error("e5m2 weights", [&] {
      Tensor w5 = T({16, 32}, DType::e5m2);
      skinny_gemm(x, w5, s1, y);
    }, "w of dtype"));
    r.push_back(expect_error("y shape", [&] { Tensor y2 = T({4, 15}, DType::bf16); skinny_gemm(x, w, none, y2); },
                             "y of shape [4,16]"));
    r.push_back(expect_error("y aliases x", [&] {
      Tensor xs = T({4, 16}, DType::bf16), ws = T({16, 16}, DType::bf16);
      skinny_gemm(xs, ws, none, xs);
    }, "overlap"));
    r.push_back(expect_error("non-contiguous w", [&] {
      Tensor wt = T({32, 16}, DType::bf16).transpose(0, 1);
      skinny_gemm(x, wt, none, y);
    }, "contiguous"));
    r.push_back(expect_error("w_tiles dtype", [&] { skinny_gemm(x, w, none, y, T({16384}, DType::f32)); },
                             "w_tiles of dtype u8"));
    if (ctx.device.is_gpu()) {  // tiles of another weight, or tiles where no kernel reads them
      Tensor xl = T({1, 256}, DType::bf16), wl = T({2048, 256}, DType::bf16), yl = T({1, 2048}, DType::bf16);
      Tensor other = skinny_gemm_tiles(T({1024, 256}, DType::bf16));
      if (other.defined())
        r.push_back(expect_error("w_tiles of another w", [&] { skinny_gemm(xl, wl, none, yl, other); },
                                 "skinny_gemm_tiles(w) on this GPU"));
      r.push_back(expect_error("w_tiles nothing reads", [&] { skinny_gemm(x, w, none, y, T({16384}, DType::u8)); },
                               "no kernel reads them"));
      Tensor x8 = T({8, 256}, DType::bf16), w8l = T({2048, 256}, DType::e4m3fn), y8 = T({8, 2048}, DType::bf16);
      if (skinny_gemm_tiles(w8l).defined()) {  // the ring takes it, so it reads the knob
        ScopedEnv knob("ANVIL_SKINNY_X16", "yes");
        r.push_back(expect_error("ANVIL_SKINNY_X16=yes", [&] { skinny_gemm(x8, w8l, s1, y8); },
                                 "ANVIL_SKINNY_X16 unset, 0 or 1"));
      }
    }
    return r;
  };
  return c;
}

// ---- skinny_gemm_fused: the norm or SwiGLU before the product, folded into its x staging -------------------
enum class Pro { norm, add_norm, swiglu };
const char* pro_name(Pro p) { return p == Pro::norm ? "rms_norm" : p == Pro::add_norm ? "add_rms_norm" : "swiglu"; }

struct SF {
  Pro pro;
  int64_t M, N, K;
  DType x, w;
  const char* x16 = nullptr;  // ANVIL_SKINNY_X16 for the launch ("1": e4m3fn with bf16 inputs stages the prologue)
};

std::vector<Check> run_sf(const Ctx& ctx, const SF& s) {
  const int64_t M = s.M, N = s.N, K = s.K;
  const float eps = 1e-5f;
  // Residual-stream-like values (a ~ 1, b ~ 0.5) and a gamma around 1; gate/up ~ 2 so SiLU's curve is exercised.
  const bool glu = s.pro == Pro::swiglu;
  auto a = rand_normal(size_t(M * (glu ? 2 * K : K)), ctx.seed, 11, glu ? 2.f : 1.f, s.x);
  auto b = rand_normal(size_t(M * K), ctx.seed, 12, 0.5f, s.x);
  auto g = rand_uniform(size_t(K), ctx.seed, 13, 0.5f, 1.5f, s.x);
  auto w = rand_normal(size_t(N * K), ctx.seed, 14, dtype_is_fp8(s.w) ? 4.f : 1.f, s.w);
  std::vector<float> ws;
  if (dtype_is_fp8(s.w)) ws = rand_uniform(size_t(N), ctx.seed, 15, 1e-3f, 1e-2f, DType::f32);
  const Device d = ctx.device;
  Tensor ta = make(a, {M, int64_t(a.size()) / M}, s.x, d), tb = make(b, {M, K}, s.x, d), tg = make(g, {K}, s.x, d);
  Tensor tw = make(w, {N, K}, s.w, d), tws = ws.empty() ? Tensor() : make(ws, {N}, DType::f32, d);
  Tensor th = make(rand_normal(size_t(M * K), ctx.seed, 16, 1e3f, s.x), {M, K}, s.x, d);
  Tensor ty = make(rand_normal(size_t(M * N), ctx.seed, 17, 1e3f, s.x), {M, N}, s.x, d);
  SkinnyPrologue p = s.pro == Pro::swiglu ? SkinnyPrologue::swiglu(ta)
                     : s.pro == Pro::norm ? SkinnyPrologue::rms_norm(ta, tg, eps)
                                          : SkinnyPrologue::add_rms_norm(ta, tb, tg, eps, th);
  {
    std::optional<ScopedEnv> knob;
    if (s.x16) knob.emplace("ANVIL_SKINNY_X16", s.x16);
    skinny_gemm_fused(p, tw, tws, ty);
  }

  // Reference in fp64 from the same rounded inputs: h rounded into x's dtype (add_rms_norm's h), x unrounded.
  std::vector<double> x(size_t(M * K)), h(size_t(M * K));
  for (int64_t m = 0; m < M; m++) {
    if (s.pro == Pro::swiglu) {
      for (int64_t k = 0; k < K; k++) {
        const double gv = a[size_t(m * 2 * K + k)], uv = a[size_t(m * 2 * K + K + k)];
        x[size_t(m * K + k)] = gv / (1.0 + std::exp(-gv)) * uv;
      }
      continue;
    }
    double ss = 0;
    for (int64_t k = 0; k < K; k++) {
      const size_t i = size_t(m * K + k);
      h[i] = s.pro == Pro::add_norm ? double(round_to(s.x, a[i] + b[i])) : double(a[i]);
      ss += h[i] * h[i];
    }
    const double r = 1.0 / std::sqrt(ss / double(K) + eps);
    for (int64_t k = 0; k < K; k++) x[size_t(m * K + k)] = h[size_t(m * K + k)] * r * g[size_t(k)];
  }
  std::vector<double> ref(size_t(M * N)), wsd = to_double(ws);
  skinny_gemm_ref(x.data(), to_double(w).data(), ws.empty() ? nullptr : wsd.data(), !ws.empty(), ref.data(), M, N, K);
  // The 1/rms factor and SiLU add a few f32 ulps to the product's own error: factor 3, not 2.
  std::vector<Check> r = {compare("y", ty, ref, derived_tol(s.x, double(K), 3))};
  if (s.pro == Pro::add_norm) r.push_back(compare("h_out", th, h, 0.0));  // exactly add_rms_norm's stored h
  return r;
}

OpCase fused_error_case() {
  OpCase c{"skinny_gemm", "skinny_gemm_fused(errors)"};
  c.test = [](const Ctx& ctx) {
    auto T = [&](Shape s, DType dt) { return Tensor::zeros(s, dt, ctx.device); };
    Tensor a = T({2, 32}, DType::bf16), b = T({2, 32}, DType::bf16), g = T({32}, DType::bf16);
    Tensor h = T({2, 32}, DType::bf16);
    Tensor w = T({16, 32}, DType::bf16), y = T({2, 16}, DType::bf16), none;
    std::vector<Check> r;
    r.push_back(expect_error("h_out aliases a", [&] {
      skinny_gemm_fused(SkinnyPrologue::add_rms_norm(a, b, g, 1e-5f, a), w, none, y);
    }, "h_out not to overlap a"));
    r.push_back(expect_error("gamma shape", [&] {
      Tensor g2 = T({31}, DType::bf16);
      skinny_gemm_fused(SkinnyPrologue::rms_norm(a, g2, 1e-5f), w, none, y);
    }, "gamma of shape [32]"));
    r.push_back(expect_error("b dtype", [&] {
      Tensor b2 = T({2, 32}, DType::f32);
      skinny_gemm_fused(SkinnyPrologue::add_rms_norm(a, b2, g, 1e-5f, h), w, none, y);
    }, "b of dtype"));
    r.push_back(expect_error("odd gu", [&] {
      Tensor gu = T({2, 63}, DType::bf16);
      skinny_gemm_fused(SkinnyPrologue::swiglu(gu), w, none, y);
    }, "gate and up"));
    r.push_back(expect_error("swiglu K", [&] {
      Tensor gu = T({2, 62}, DType::bf16);
      skinny_gemm_fused(SkinnyPrologue::swiglu(gu), w, none, y);
    }, "K = 31"));
    r.push_back(expect_error("h_out without b", [&] {
      SkinnyPrologue p = SkinnyPrologue::rms_norm(a, g, 1e-5f);
      p.h_out = h;
      skinny_gemm_fused(p, w, none, y);
    }, "both given or both left out"));
    return r;
  };
  return c;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct NK { int64_t N, K; };
  // Odd N and K (tails of the 16-byte pack and of the column groups; K=71 and, for fp8, K=1000 take the byte-load
  // path), a small aligned shape, a small-N/long-K shape that makes the GPU split K (3 column blocks), and the
  // Llama-8B projections scaled down by 16: qkv (6144, 4096), down (4096, 14336), gate_up (28672, 4096).
  const NK shapes[] = {{33, 71}, {96, 256}, {257, 1000}, {40, 4096}, {384, 256}, {256, 896}, {1792, 256}};
  const DType floats[] = {DType::bf16, DType::f32, DType::f16};
  int i = 0;
  for (DType w : {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz})
    for (NK nk : shapes)
      for (int64_t M : {1, 2, 4, 7, 16}) {
        // Activation and output dtypes and the scale kind rotate over the cases (every pair appears).
        const DType x = floats[i % 3], y = floats[(i / 3) % 3];
        Scale sc = dtype_is_fp8(w) ? (i % 2 ? Scale::per_channel : Scale::per_tensor)
                                   : (i % 4 == 3 ? Scale::per_channel : Scale::none);
        i++;
        SG s{M, nk.N, nk.K, x, w, y, sc};
        OpCase c{"skinny_gemm", sg_id(s)};
        c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
        out.push_back(c);
      }
  // K longer than one staged x chunk (3072 k at 4 rows, 1536 at 8) without a K split on a 132-SM GPU: the
  // kernel restages x inside one block.
  for (DType w : {DType::bf16, DType::f16, DType::e4m3fn, DType::e4m3fnuz})
    for (int64_t M : {4, 7}) {
      SG s{M, 3200, 3520, DType::bf16, w, DType::bf16, dtype_is_fp8(w) ? Scale::per_channel : Scale::none};
      OpCase c{"skinny_gemm", sg_id(s)};
      c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
      out.push_back(c);
    }
  // The GPU's tensor-core path (2..16 rows, 16-bit x whose values the weights' MMA type holds: bf16 x with bf16 or
  // e4m3 weights, f16 x with f16 or e4m3 weights): rows 9..15 (two 8-row MMA groups, the second partly padded),
  // K not a multiple of 16 (71, 520 for fp8's 16-wide packs; 71 and 1000 also take the unaligned loads), N not a
  // multiple of 16, and N = 40 / K = 4096 where the GPU splits K and several warps share a 16-row slab.
  const NK mshapes[] = {{33, 71}, {130, 520}, {257, 1000}, {40, 4096}};
  struct WX { DType w, x; };
  int k = 0;
  for (WX wx : {WX{DType::bf16, DType::bf16}, WX{DType::f16, DType::f16}, WX{DType::e4m3fn, DType::bf16},
                WX{DType::e4m3fnuz, DType::bf16}, WX{DType::e4m3fn, DType::f16}})
    for (NK nk : mshapes)
      for (int64_t M : {2, 9, 15, 16}) {
        const DType y = floats[k % 3];
        const Scale sc = dtype_is_fp8(wx.w) ? (k % 2 ? Scale::per_channel : Scale::per_tensor)
                                            : (k % 4 == 3 ? Scale::per_channel : Scale::none);
        k++;
        SG s{M, nk.N, nk.K, wx.x, wx.w, y, sc};
        OpCase c{"skinny_gemm", sg_id(s)};
        c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
        out.push_back(c);
      }
  // The GPU's ring path (CUDA sm_90+, 16-bit x, rows of w a multiple of 128 bytes; e4m3fn at 1-8 rows converted
  // in hardware, with bf16 x staged as f16, and from 9 rows in software; e4m3fnuz from 9 rows; ANVIL_SKINNY_RING=0
  // turns it off, =2 on for every row count): 28672 rows are 14 tiles per block on 132 SMs, two passes; 14336
  // columns are 14-28 pieces of 1024 bytes, so the x slots are reused many times; 1408 columns end on a partial
  // piece and 4100 rows on a partial tile.
  const NK rshapes[] = {{28672, 256}, {2112, 14336}, {4100, 1408}};
  int r = 0;
  for (WX wx : {WX{DType::bf16, DType::bf16}, WX{DType::e4m3fn, DType::bf16}, WX{DType::e4m3fnuz, DType::bf16},
                WX{DType::f16, DType::f16}, WX{DType::e4m3fn, DType::f16}})
    for (NK nk : rshapes)
      for (int64_t M : {1, 4, 9}) {
        if (nk.K == 14336 && wx.x == DType::f16) continue;  // the long rows once per x dtype is enough
        const DType y = floats[r % 3];
        const Scale sc = dtype_is_fp8(wx.w) ? (r % 2 ? Scale::per_channel : Scale::per_tensor) : Scale::none;
        r++;
        for (bool tiles : {false, true}) {  // through the tensor map, and from the pre-tiled copy
          SG s{nk.N == 2112 && M == 9 ? 16 : M, nk.N, nk.K, wx.x, wx.w, y, sc};
          s.tiles = tiles;
          OpCase c{"skinny_gemm", sg_id(s)};
          c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
          out.push_back(c);
        }
      }
  // bf16 x of every magnitude and NaN weight codes, through each FP8 path (the ring's f16 staging for e4m3fn).
  // One row of 2112 x 14336 (30 MB of e4m3fn) takes the staging at one row; 4100 x 1408 there keeps the register
  // kernels.
  auto wide = [&](int64_t M, int64_t N, int64_t K, DType w, bool tiles = false) {
    SG s{M, N, K, DType::bf16, w, DType::f32, Scale::per_channel, true, dtype_is_fp8(w), tiles};
    if (!dtype_is_fp8(w)) s.scale = Scale::none;
    OpCase c{"skinny_gemm", sg_id(s)};
    c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
    out.push_back(c);
  };
  for (DType w : {DType::e4m3fn, DType::e4m3fnuz, DType::bf16})
    for (int64_t M : {1, 4, 9, 16}) wide(M, 4100, 1408, w);
  wide(1, 2112, 14336, DType::e4m3fn);
  wide(1, 2112, 14336, DType::e4m3fn, true);
  wide(16, 4100, 1408, DType::e4m3fnuz, true);
  // x staged as f16 once per product (ANVIL_SKINNY_X16=1), at every row count: the ring shapes, and x of every
  // magnitude with NaN weight codes (its scale is the row's, where convert_x's is the piece's).
  for (NK nk : rshapes)
    for (int64_t M : {1, 4, 9, 16}) {
      SG s{M, nk.N, nk.K, DType::bf16, DType::e4m3fn, M % 2 ? DType::bf16 : DType::f32, Scale::per_channel};
      s.x16 = true;
      OpCase c{"skinny_gemm", sg_id(s)};
      c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
      out.push_back(c);
    }
  for (int64_t M : {1, 4, 9, 16}) {
    SG s{M, 2112, 14336, DType::bf16, DType::e4m3fn, DType::f32, Scale::per_channel, true, true, M == 16};
    s.x16 = true;
    OpCase c{"skinny_gemm", sg_id(s)};
    c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
    out.push_back(c);
  }
  // 17..32 rows: e4m3fn with f16 x, or bf16 x staged as f16 (the default from 7 rows), in one pass of the ring's
  // four row groups on sm_90; with ANVIL_SKINNY_X16=0, other weight dtypes, and on the CPU, in slices of 16 rows.
  for (NK nk : rshapes)
    for (int64_t M : {17, 24, 32}) {
      for (DType xd : {DType::bf16, DType::f16}) {
        SG s{M, nk.N, nk.K, xd, DType::e4m3fn, M == 24 ? DType::f32 : DType::bf16, Scale::per_channel};
        s.x16 = xd == DType::bf16, s.tiles = M == 17;
        OpCase c{"skinny_gemm", sg_id(s)};
        c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
        out.push_back(c);
      }
    }
  for (DType w : {DType::e4m3fn, DType::e4m3fnuz, DType::bf16}) {  // slices (e4m3fn: ANVIL_SKINNY_X16=0)
    SG s{w == DType::bf16 ? 20 : 32, 4100, 1408, DType::bf16, w, DType::f32,
         dtype_is_fp8(w) ? Scale::per_tensor : Scale::none};
    OpCase c{"skinny_gemm", sg_id(s)};
    c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
    out.push_back(c);
  }
  {
    SG s{32, 2112, 14336, DType::bf16, DType::e4m3fn, DType::f32, Scale::per_channel, true, true};
    s.x16 = true;
    OpCase c{"skinny_gemm", sg_id(s)};
    c.test = [=](const Ctx& ctx) { return run_sg(ctx, s); };
    out.push_back(c);
  }
  out.push_back(error_case());

  // Fused prologues. K = 1000 takes the byte-load path for bf16 weights (2000-byte rows); K = 4096 is one whole
  // x chunk; K = 14336 is two chunks at one row (the ss sums cross a restage); N = 40 makes the GPU split K for
  // SwiGLU (the norm never splits). Rows 1 (decode), 3 and 16.
  const NK fshapes[] = {{96, 256}, {257, 1000}, {384, 4096}, {40, 4096}, {72, 14336}};
  int j = 0;
  for (Pro pro : {Pro::norm, Pro::add_norm, Pro::swiglu})
    for (DType w : {DType::bf16, DType::e4m3fn})
      for (NK nk : fshapes)
        for (int64_t M : {1, 3, 16}) {
          SF s{pro, M, nk.N, nk.K, floats[j++ % 3], w};
          OpCase c{"skinny_gemm", str("skinny_gemm_fused(", pro_name(pro), ",", dtype_name(s.x), "x", dtype_name(w),
                                      ",M=", M, ",N=", nk.N, ",K=", nk.K, ")")};
          c.test = [=](const Ctx& ctx) { return run_sf(ctx, s); };
          out.push_back(c);
        }
  // e4m3fn with bf16 inputs: the prologue runs once, in the kernel that stages x as f16 for the ring
  // (skinny_gemm_fused_stages: from 2 rows by default, "" below; ANVIL_SKINNY_X16=1 at every row count), or with =0
  // in every block of a register kernel.
  for (Pro pro : {Pro::norm, Pro::add_norm, Pro::swiglu})
    for (NK nk : {NK{2112, 4096}, NK{136, 14336}, NK{4100, 1408}})
      for (auto [M, knob] :
           {std::pair<int64_t, const char*>{2, ""}, {5, ""}, {8, "1"}, {16, "1"}, {4, "0"}, {16, "0"}, {24, ""},
            {32, "0"}}) {
        SF s{pro, M, nk.N, nk.K, DType::bf16, DType::e4m3fn, knob};
        OpCase c{"skinny_gemm", str("skinny_gemm_fused(", pro_name(pro), ",bf16xe4m3fn,M=", M, ",N=", nk.N, ",K=", nk.K,
                                    ",x16=", *knob ? knob : "auto", ")")};
        c.test = [=](const Ctx& ctx) { return run_sf(ctx, s); };
        out.push_back(c);
      }
  out.push_back(fused_error_case());

  // Perf: Llama-3.1-8B decode projections, bf16 activations and outputs; bytes = weights + x + y (the weight
  // stream is the floor; the lead compares GB/s to the copy ceiling).
  // Then e4m3fn with f16 x: the ring's f16 MMAs take it as it comes, with no converter warps and no per-piece
  // rescale (bf16 x needs both), and from 9 rows the hardware conversion too; last, bf16 x staged as f16 once per
  // product by a kernel before the ring (ANVIL_SKINNY_X16=1).
  // The LM head (128256, 4096) too, with f32 logits as the model asks for them, for the FP8 head (--fp8-lm-head)
  // beside the 16-bit one, bf16 x (the final norm's output) only.
  struct P { int64_t N, K; const char* name; bool head = false; };
  struct V { bool tiles; DType wd, xd; bool x16 = false; };
  const DType bf = DType::bf16, e4 = DType::e4m3fn;
  for (V v : {V{false, bf, bf}, V{false, e4, bf}, V{true, bf, bf}, V{true, e4, bf}, V{true, e4, DType::f16},
              V{true, e4, bf, true}, V{false, e4, DType::f16}, V{false, e4, bf, true}})
    for (P pr : {P{6144, 4096, "qkv"}, P{4096, 4096, "o"}, P{28672, 4096, "gate_up"}, P{4096, 14336, "down"},
                 P{128256, 4096, "lm_head", true}})
      for (int64_t M : {1, 4, 16, 24, 32}) {
        if (pr.head && (M > 16 || v.xd != bf || v.x16 || (v.tiles && v.wd == bf))) continue;
        // The wide rings (three row groups to 24 rows, four to 32) only with e4m3fn and f16 x, given or staged.
        if ((M > 16) != (v.wd == e4 && !v.tiles && (v.x16 || v.xd == DType::f16))) continue;
        const bool tiles = v.tiles;
        const DType wd = v.wd, xd = v.xd;
        OpCase c{"skinny_gemm", str("skinny_gemm_perf(", dtype_name(wd), xd == DType::f16 ? ",f16x" : "", ",llama8b_",
                                    pr.name, ",M=", M, ",N=", pr.N, ",K=", pr.K, tiles ? ",tiles" : "",
                                    v.x16 ? ",x16" : "", ")")};
        c.perf = [=](const Ctx& ctx) {
          const int64_t N = pr.N, K = pr.K;
          ScopedEnv stage("ANVIL_SKINNY_X16", x16_value(v.x16));  // the staging runs inside the timed launches
          Tensor x = make(rand_normal(size_t(M * K), ctx.seed, 1, 1.f, xd), {M, K}, xd, ctx.device);
          Tensor w = make(rand_normal(size_t(N * K), ctx.seed, 2, dtype_is_fp8(wd) ? 4.f : 0.02f, wd), {N, K}, wd,
                          ctx.device);
          Tensor ws = dtype_is_fp8(wd) ? make(rand_uniform(size_t(N), ctx.seed, 3, 1e-3f, 1e-2f, DType::f32), {N},
                                              DType::f32, ctx.device)
                                       : Tensor();
          const DType yd = pr.head ? DType::f32 : xd;
          Tensor y = Tensor::empty({M, N}, yd, ctx.device);
          PerfResult r;
          Tensor wt = tiles ? skinny_gemm_tiles(w) : Tensor();
          r.us = time_us(ctx, [&] { skinny_gemm(x, w, ws, y, wt); });
          // As a decode step runs it: launches back to back in a graph, each on its own copy of the weight (so
          // none is read from L2), the next one's first weights in flight under the previous one's tail.
          if (ctx.device.is_gpu()) {
            const int count = int(std::max<int64_t>(4, (int64_t(256) << 20) / (N * K * dtype_size(wd)) + 1));
            std::vector<Tensor> wv{w}, tv{wt}, yv{y};
            for (int i = 1; i < count; i++) {
              wv.push_back(w.clone()), yv.push_back(Tensor::empty({M, N}, yd, ctx.device));
              tv.push_back(tiles ? skinny_gemm_tiles(wv.back()) : Tensor());
            }
            r.graph_us = time_us_graph(ctx, count, [&](int i) {
              skinny_gemm(x, wv[size_t(i)], ws, yv[size_t(i)], tv[size_t(i)]);
            });
          }
          r.flops = 2.0 * double(M) * double(N) * double(K);
          r.bytes = double(N * K) * double(dtype_size(wd)) + 2.0 * double(M * K) + double(M * N * dtype_size(yd));
          return r;
        };
        out.push_back(c);
      }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
