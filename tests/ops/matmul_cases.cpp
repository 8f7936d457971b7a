#include <algorithm>
// matmul cases: the general product (every dtype, transpose, alpha/beta, odd shapes, f32 accumulation output),
// the linear layer forward/backward with bias, argument errors, and the perf shapes. FP8 cases live in
// matmul_fp8_cases.cpp.
#include "harness.h"
#include "kernels/matmul/matmul.h"

namespace anvil::test {
namespace {

struct Mnk { int64_t M, N, K; };
// Odd sizes: tails in every tile dimension (64/128 tiles, 16-deep k-slices) and a 1-row product.
const Mnk kShapes[] = {{1, 7, 13}, {33, 65, 17}, {128, 96, 200}, {257, 129, 511}};

const char* trans_name(bool ta, bool tb) { return ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN"); }

// One product c = alpha op(a) op(b) + beta c with inputs in `dt` and c in `ct`, against the fp64 reference.
std::vector<Check> run_matmul(const Ctx& ctx, DType dt, DType ct, Mnk s, bool ta, bool tb, float alpha, float beta) {
  const Shape sa = ta ? Shape{s.K, s.M} : Shape{s.M, s.K}, sb = tb ? Shape{s.N, s.K} : Shape{s.K, s.N};
  auto a = rand_normal(size_t(s.M * s.K), ctx.seed, 1, 1.f, dt);
  auto b = rand_normal(size_t(s.K * s.N), ctx.seed, 2, 1.f, dt);
  auto c0 = rand_normal(size_t(s.M * s.N), ctx.seed, 3, 1.f, ct);
  Tensor ta_ = make(a, sa, dt, ctx.device), tb_ = make(b, sb, dt, ctx.device);
  Tensor tc = make(c0, {s.M, s.N}, ct, ctx.device);  // beta == 0: holds values the kernel must not read
  matmul(ta_, tb_, tc, ta, tb, alpha, beta);
  std::vector<double> rc = to_double(c0);
  matmul_ref(to_double(a).data(), to_double(b).data(), rc.data(), s.M, s.N, s.K, ta, tb, alpha, beta);
  return {compare("c", tc, rc, derived_tol(ct, double(s.K), 2))};
}

void add_matmul_cases(std::vector<OpCase>& out) {
  struct AB { float alpha, beta; };
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (Mnk s : kShapes)
      for (int t = 0; t < 4; t++)
        for (AB ab : {AB{1.f, 0.f}, AB{0.5f, 2.f}}) {
          const bool ta = t & 2, tb = t & 1;
          std::string id = str("matmul(", dtype_name(dt), ",M=", s.M, ",N=", s.N, ",K=", s.K, ",",
                               trans_name(ta, tb));
          if (ab.beta != 0) id += str(",alpha=", fmt_g(ab.alpha), ",beta=", fmt_g(ab.beta));
          OpCase c{"matmul", id + ")"};
          c.test = [=](const Ctx& ctx) { return run_matmul(ctx, dt, dt, s, ta, tb, ab.alpha, ab.beta); };
          out.push_back(c);
        }
  // 16-bit inputs into an f32 c with beta = 1: how dw += dy^T @ x accumulates over micro-batches.
  for (DType dt : {DType::bf16, DType::f16})
    for (Mnk s : kShapes)
      for (int t = 0; t < 4; t++) {
        const bool ta = t & 2, tb = t & 1;
        OpCase c{"matmul", str("matmul(", dtype_name(dt), "->f32,M=", s.M, ",N=", s.N, ",K=", s.K, ",",
                               trans_name(ta, tb), ",beta=1)")};
        c.test = [=](const Ctx& ctx) { return run_matmul(ctx, dt, DType::f32, s, ta, tb, 1.f, 1.f); };
        out.push_back(c);
      }
}

// Batched products: c[i] = alpha op(a[i]) op(b[i]) + beta c[i], a or b shared (batch 1) or per product; and
// the batch sum c = alpha sum_i op(a[i]) op(b[i]) + beta c (the weight gradient of a batched product).
struct Bmnk { int64_t B, M, N, K; };
std::vector<Check> run_batched(const Ctx& ctx, DType dt, DType ct, Bmnk s, bool ta, bool tb, int shared, bool sum,
                               float alpha, float beta) {
  const int64_t Ba = shared == 1 ? 1 : s.B, Bb = shared == 2 ? 1 : s.B, Bc = sum ? 1 : s.B;
  const Shape sa = ta ? Shape{Ba, s.K, s.M} : Shape{Ba, s.M, s.K}, sb = tb ? Shape{Bb, s.N, s.K} : Shape{Bb, s.K, s.N};
  auto a = rand_normal(size_t(Ba * s.M * s.K), ctx.seed, 1, 1.f, dt);
  auto b = rand_normal(size_t(Bb * s.K * s.N), ctx.seed, 2, 1.f, dt);
  auto c0 = rand_normal(size_t(Bc * s.M * s.N), ctx.seed, 3, 1.f, ct);
  Tensor ta_ = make(a, sa, dt, ctx.device), tb_ = make(b, sb, dt, ctx.device);
  Tensor tc = sum ? make(c0, {s.M, s.N}, ct, ctx.device) : make(c0, {s.B, s.M, s.N}, ct, ctx.device);
  if (sum)
    matmul_batch_sum(ta_, tb_, tc, ta, tb, alpha, beta);
  else
    matmul_batched(ta_, tb_, tc, ta, tb, alpha, beta);
  const std::vector<double> ad = to_double(a), bd = to_double(b);
  std::vector<double> rc = to_double(c0);
  for (int64_t i = 0; i < s.B; i++) {
    const double* ai = ad.data() + (Ba == 1 ? 0 : i) * s.M * s.K;
    const double* bi = bd.data() + (Bb == 1 ? 0 : i) * s.K * s.N;
    double* ci = rc.data() + (sum ? 0 : i) * s.M * s.N;
    matmul_ref(ai, bi, ci, s.M, s.N, s.K, ta, tb, alpha, sum && i > 0 ? 1.0 : beta);
  }
  return {compare("c", tc, rc, derived_tol(ct, double(s.K) * (sum ? double(s.B) : 1.0), 2))};
}

void add_batched_cases(std::vector<OpCase>& out) {
  const char* shared_name[] = {"", ",a shared", ",b shared"};
  for (DType dt : {DType::f32, DType::bf16})
    for (Bmnk s : {Bmnk{3, 33, 65, 17}, Bmnk{2, 128, 96, 200}, Bmnk{5, 1, 7, 13}})
      for (int t = 0; t < 4; t++)
        for (int shared = 0; shared < 3; shared++) {
          const bool ta = t & 2, tb = t & 1;
          const std::string dims = str("B=", s.B, ",M=", s.M, ",N=", s.N, ",K=", s.K, ",", trans_name(ta, tb));
          const float alpha = shared == 1 ? 0.5f : 1.f, beta = shared == 1 ? 2.f : 0.f;
          OpCase c{"matmul", str("matmul_batched(", dtype_name(dt), ",", dims, shared_name[shared],
                                 beta != 0 ? ",alpha=0.5,beta=2" : "", ")")};
          c.test = [=](const Ctx& ctx) { return run_batched(ctx, dt, dt, s, ta, tb, shared, false, alpha, beta); };
          out.push_back(c);
          if (shared) continue;
          // The sum into f32 with beta = 1 (gradient accumulation), and into the input dtype with beta = 0.
          OpCase g{"matmul", str("matmul_batch_sum(", dtype_name(dt), "->f32,", dims, ",beta=1)")};
          g.test = [=](const Ctx& ctx) { return run_batched(ctx, dt, DType::f32, s, ta, tb, 0, true, 1.f, 1.f); };
          out.push_back(g);
          OpCase h{"matmul", str("matmul_batch_sum(", dtype_name(dt), ",", dims, ",alpha=0.5)")};
          h.test = [=](const Ctx& ctx) { return run_batched(ctx, dt, dt, s, ta, tb, 0, true, 0.5f, 0.f); };
          out.push_back(h);
        }
  // Outputs past matmul.cpp's serial threshold (4M): the GPU sums one product per batch into c instead of parts.
  const Bmnk big{2, 2048, 2048, 16};
  for (int t : {0, 3}) {
    const bool ta = t & 2, tb = t & 1;
    OpCase g{"matmul", str("matmul_batch_sum(bf16->f32,B=2,M=2048,N=2048,K=16,", trans_name(ta, tb), ",beta=1)")};
    g.test = [=](const Ctx& ctx) { return run_batched(ctx, DType::bf16, DType::f32, big, ta, tb, 0, true, 1.f, 1.f); };
    out.push_back(g);
  }
}

// Linear layer: x (B, T, C), w (OC, C), bias (OC); y in x's dtype or f32 (logits).
struct Lin { int64_t B, T, C, OC; };
void add_linear_cases(std::vector<OpCase>& out) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (Lin s : {Lin{2, 3, 17, 33}, Lin{1, 5, 64, 96}, Lin{4, 16, 200, 129}})
      for (bool has_bias : {true, false})
        for (bool y_f32 : {false, true}) {
          if (y_f32 && (dt == DType::f32 || !has_bias)) continue;  // f32 logits from 16-bit x: one variant
          const DType yt = y_f32 ? DType::f32 : dt;
          const int64_t N = s.B * s.T;
          OpCase c{"matmul", str("linear(", dtype_name(dt), yt != dt ? "->f32" : "", ",x=",
                                 shape_str({s.B, s.T, s.C}), ",w=", shape_str({s.OC, s.C}),
                                 has_bias ? ",bias" : "", ")")};
          c.test = [=](const Ctx& ctx) {
            auto x = rand_normal(size_t(N * s.C), ctx.seed, 1, 1.f, dt);
            auto w = rand_normal(size_t(s.OC * s.C), ctx.seed, 2, 0.1f, dt);
            auto bias = rand_normal(size_t(s.OC), ctx.seed, 3, 1.f, dt);
            auto dy = rand_normal(size_t(N * s.OC), ctx.seed, 4, 1.f, dt);
            auto dw0 = rand_normal(size_t(s.OC * s.C), ctx.seed, 5, 1.f, DType::f32);  // += : start non-zero
            auto db0 = rand_normal(size_t(s.OC), ctx.seed, 6, 1.f, DType::f32);
            Tensor tx = make(x, {s.B, s.T, s.C}, dt, ctx.device), tw = make(w, {s.OC, s.C}, dt, ctx.device);
            Tensor tb = has_bias ? make(bias, {s.OC}, dt, ctx.device) : Tensor();
            Tensor ty = Tensor::empty({s.B, s.T, s.OC}, yt, ctx.device);
            matmul_fwd(tx, tw, tb, ty);
            Tensor tdy = make(dy, {s.B, s.T, s.OC}, dt, ctx.device);
            Tensor tdx = Tensor::empty({s.B, s.T, s.C}, dt, ctx.device);
            Tensor tdw = make(dw0, {s.OC, s.C}, DType::f32, ctx.device);
            Tensor tdb = has_bias ? make(db0, {s.OC}, DType::f32, ctx.device) : Tensor();
            matmul_bwd(tdy, tx, tw, tdx, tdw, tdb);

            const auto xd = to_double(x), wd = to_double(w), bd = to_double(bias), dyd = to_double(dy);
            std::vector<double> ry(size_t(N * s.OC)), rdx(xd.size()), rdw = to_double(dw0), rdb = to_double(db0);
            matmul_fwd_ref(xd.data(), wd.data(), has_bias ? bd.data() : nullptr, ry.data(), N, s.C, s.OC);
            matmul_bwd_ref(dyd.data(), xd.data(), wd.data(), rdx.data(), rdw.data(), has_bias ? rdb.data() : nullptr,
                           N, s.C, s.OC);
            std::vector<Check> r{compare("y", ty, ry, derived_tol(yt, double(s.C + 1), 2)),
                                 compare("dx", tdx, rdx, derived_tol(dt, double(s.OC), 3)),
                                 compare("dw", tdw, rdw, derived_tol(DType::f32, double(N + 1), 3))};
            if (has_bias) r.push_back(compare("dbias", tdb, rdb, derived_tol(DType::f32, double(N + 1), 3)));
            return r;
          };
          if (dt == DType::f32 && s.C < 100 && yt == dt) {
            // The reference backward against central differences of the reference forward, in fp64.
            c.grad = [=](const Ctx& ctx) {
              auto x = to_double(rand_normal(size_t(N * s.C), ctx.seed, 1, 1.f, DType::f32));
              auto w = to_double(rand_normal(size_t(s.OC * s.C), ctx.seed, 2, 0.1f, DType::f32));
              auto bias = to_double(rand_normal(size_t(s.OC), ctx.seed, 3, 1.f, DType::f32));
              auto g = to_double(rand_normal(size_t(N * s.OC), ctx.seed, 4, 1.f, DType::f32));
              const double* bp = has_bias ? bias.data() : nullptr;
              auto fwd = [&](const std::vector<double>& xx, const std::vector<double>& ww, const double* bb) {
                std::vector<double> y(size_t(N * s.OC));
                matmul_fwd_ref(xx.data(), ww.data(), bb, y.data(), N, s.C, s.OC);
                return y;
              };
              std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(bias.size(), 0.0);
              matmul_bwd_ref(g.data(), x.data(), w.data(), dx.data(), dw.data(), has_bias ? db.data() : nullptr, N,
                             s.C, s.OC);
              auto as_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
              // y is linear in each input: central differences are exact up to fp64 rounding (~1e-10 relative).
              std::vector<Check> r{
                  compare("dx vs finite differences", as_f(dx),
                          finite_diff([&](const std::vector<double>& v) { return fwd(v, w, bp); }, x, g), 1e-6),
                  compare("dw vs finite differences", as_f(dw),
                          finite_diff([&](const std::vector<double>& v) { return fwd(x, v, bp); }, w, g), 1e-6)};
              if (has_bias)
                r.push_back(compare("dbias vs finite differences", as_f(db),
                                    finite_diff([&](const std::vector<double>& v) { return fwd(x, w, v.data()); },
                                                bias, g),
                                    1e-6));
              return r;
            };
          }
          out.push_back(c);
        }
}

// Bad arguments: each must throw anvil::Error naming the problem (never abort or write out of bounds).
void add_error_case(std::vector<OpCase>& out) {
  OpCase c{"matmul", "matmul(errors)"};
  c.test = [](const Ctx& ctx) {
    auto T = [&](Shape s, DType dt) { return Tensor::zeros(s, dt, ctx.device); };
    Tensor a = T({4, 8}, DType::bf16), b = T({8, 5}, DType::bf16), c = T({4, 5}, DType::bf16);
    Tensor none;
    std::vector<Check> r;
    r.push_back(expect_error("K mismatch", [&] { Tensor b2 = T({7, 5}, DType::bf16); matmul(a, b2, c, false, false); },
                             "agree on K"));
    r.push_back(expect_error("c shape", [&] { Tensor c2 = T({5, 4}, DType::bf16); matmul(a, b, c2, false, false); },
                             "c of shape [4,5]"));
    r.push_back(expect_error("b dtype", [&] { Tensor b2 = T({8, 5}, DType::f16); matmul(a, b2, c, false, false); },
                             "b of dtype bf16"));
    r.push_back(expect_error("c dtype", [&] { Tensor c2 = T({4, 5}, DType::f16); matmul(a, b, c2, false, false); },
                             "c of dtype"));
    r.push_back(expect_error("int dtype", [&] {
      Tensor a2 = T({4, 8}, DType::i32), b2 = T({8, 5}, DType::i32), c2 = T({4, 5}, DType::i32);
      matmul(a2, b2, c2, false, false);
    }, "a of dtype"));
    r.push_back(expect_error("non-contiguous", [&] {
      Tensor at = T({8, 4}, DType::bf16).transpose(0, 1);
      matmul(at, b, c, false, false);
    }, "contiguous"));
    r.push_back(expect_error("3-D a", [&] { Tensor a3 = T({1, 4, 8}, DType::bf16); matmul(a3, b, c, false, false); },
                             "2 dimensions"));
    r.push_back(expect_error("undefined b", [&] { matmul(a, none, c, false, false); }, "undefined"));
    r.push_back(expect_error("c aliases a", [&] {
      Tensor sq = T({8, 8}, DType::bf16), b8 = T({8, 8}, DType::bf16);
      matmul(sq, b8, sq, false, false);
    }, "overlap"));
    r.push_back(expect_error("linear C mismatch", [&] {
      Tensor x = T({2, 3, 8}, DType::bf16), w = T({6, 7}, DType::bf16), y = T({2, 3, 6}, DType::bf16);
      matmul_fwd(x, w, none, y);
    }, "x's last dimension"));
    r.push_back(expect_error("linear bias shape", [&] {
      Tensor x = T({2, 3, 8}, DType::bf16), w = T({6, 8}, DType::bf16), y = T({2, 3, 6}, DType::bf16);
      Tensor bias = T({5}, DType::bf16);
      matmul_fwd(x, w, bias, y);
    }, "bias of shape [6]"));
    r.push_back(expect_error("linear dw dtype", [&] {
      Tensor x = T({3, 8}, DType::bf16), w = T({6, 8}, DType::bf16), dy = T({3, 6}, DType::bf16);
      Tensor dw = T({6, 8}, DType::bf16);
      matmul_bwd(dy, x, w, none, dw, none);
    }, "dw of dtype f32"));
    r.push_back(expect_error("fp8 w_scale shape", [&] {
      Tensor a8 = T({4, 32}, DType::e4m3fn), w8 = T({16, 32}, DType::e4m3fn), o = T({4, 16}, DType::bf16);
      Tensor sa = T({1}, DType::f32), sw = T({15}, DType::f32);
      matmul_fp8(a8, sa, w8, sw, o);
    }, "w_scale of shape [1] or [16]"));
    r.push_back(expect_error("fp8 a_scale shape", [&] {
      Tensor a8 = T({4, 32}, DType::e4m3fn), w8 = T({16, 32}, DType::e4m3fn), o = T({4, 16}, DType::bf16);
      Tensor sa = T({5}, DType::f32), sw = T({1}, DType::f32);
      matmul_fp8(a8, sa, w8, sw, o);
    }, "a_scale of shape [1], or [4] (per row) with fp8 a"));
    r.push_back(expect_error("per-row a_scale with bf16 a", [&] {
      Tensor a = T({4, 32}, DType::bf16), w8 = T({16, 32}, DType::e4m3fn), o = T({4, 16}, DType::bf16);
      Tensor sa = T({4}, DType::f32), sw = T({1}, DType::f32);
      matmul_fp8(a, sa, w8, sw, o);
    }, "a_scale of shape [1], or [4] (per row) with fp8 a"));
    r.push_back(expect_error("fp8 f16 out", [&] {
      Tensor a8 = T({4, 32}, DType::e4m3fn), w8 = T({16, 32}, DType::e4m3fn), o = T({4, 16}, DType::f16);
      Tensor sa = T({1}, DType::f32), sw = T({1}, DType::f32);
      matmul_fp8(a8, sa, w8, sw, o);
    }, "out of dtype"));
    r.push_back(expect_error("batched a batch", [&] {
      Tensor a3 = T({2, 4, 8}, DType::bf16), b3 = T({3, 8, 5}, DType::bf16), c3 = T({3, 4, 5}, DType::bf16);
      matmul_batched(a3, b3, c3, false, false);
    }, "a with a batch of 3"));
    r.push_back(expect_error("batched c shape", [&] {
      Tensor a3 = T({1, 4, 8}, DType::bf16), b3 = T({3, 8, 5}, DType::bf16), c3 = T({3, 5, 4}, DType::bf16);
      matmul_batched(a3, b3, c3, false, false);
    }, "c of shape [3,4,5]"));
    r.push_back(expect_error("batched 2-D a", [&] {
      Tensor b3 = T({3, 8, 5}, DType::bf16), c3 = T({3, 4, 5}, DType::bf16);
      matmul_batched(a, b3, c3, false, false);
    }, "3 dimensions"));
    r.push_back(expect_error("batch sum b batch", [&] {
      Tensor a3 = T({3, 4, 8}, DType::bf16), b3 = T({1, 8, 5}, DType::bf16), c2 = T({4, 5}, DType::f32);
      matmul_batch_sum(a3, b3, c2, false, false);
    }, "b with a's batch of 3"));
    r.push_back(expect_error("batch sum c aliases a", [&] {
      Tensor a3 = T({2, 8, 8}, DType::f32), b3 = T({2, 8, 8}, DType::f32);
      Tensor c2 = a3.select(0, 1);
      matmul_batch_sum(a3, b3, c2, false, false);
    }, "overlap"));
    if (ctx.device.is_gpu())
      r.push_back(expect_error("device mismatch", [&] {
        Tensor bc = Tensor::zeros({8, 5}, DType::bf16, Device::cpu());
        matmul(a, bc, c, false, false);
      }, "on one device"));
    return r;
  };
  out.push_back(c);
}

// Perf: a large square training-style product, and Llama-8B decode projections (bf16 weights, M = batch of
// tokens): decode is bound by reading the weight once, so bytes count the weight only.
void add_perf_cases(std::vector<OpCase>& out) {
  auto perf_case = [&](std::string id, int64_t M, int64_t N, int64_t K, bool weight_bytes) {
    OpCase c{"matmul", std::move(id)};
    c.perf = [=](const Ctx& ctx) {
      const DType dt = DType::bf16;
      Tensor a = make(rand_normal(size_t(M * K), ctx.seed, 1, 1.f, dt), {M, K}, dt, ctx.device);
      Tensor w = make(rand_normal(size_t(N * K), ctx.seed, 2, 1.f, dt), {N, K}, dt, ctx.device);
      Tensor y = Tensor::empty({M, N}, dt, ctx.device);
      PerfResult r;
      r.us = time_us(ctx, [&] { matmul(a, w, y, false, true); });
      r.flops = 2.0 * double(M) * double(N) * double(K);
      r.bytes = weight_bytes ? double(N * K) * 2 : double(M * K + N * K + M * N) * 2;
      if (M <= 64 && ctx.device.is_gpu()) {
        // As a decode step runs it: back to back in a graph, each launch on its own weight copy (>= 256 MB in
        // all, so none is still in the 50 MB L2 when its turn comes round).
        const int count = int(std::max<int64_t>(4, (int64_t(256) << 20) / (N * K * 2) + 1));
        std::vector<Tensor> ws{w}, ys{y};
        for (int i = 1; i < count; i++) ws.push_back(w.clone()), ys.push_back(Tensor::empty({M, N}, dt, ctx.device));
        r.graph_us = time_us_graph(ctx, count, [&](int i) { matmul(a, ws[size_t(i)], ys[size_t(i)], false, true); });
      }
      return r;
    };
    out.push_back(c);
  };
  perf_case("matmul_perf(bf16,M=8192,N=8192,K=8192,NT)", 8192, 8192, 8192, false);
  // Mamba-130m at batch 16 x 2048 (D 1536, C 768, 80 = dt rank 48 + 2 x 16 states), channel-major activations:
  // in_proj's x half, x_proj, and in_proj's weight gradient, each in one call; Mamba-1.4B's weight gradients at
  // batch 4 (D 4096, C 2048), which take the serial batch sum (ANVIL_BATCH_SUM=parts for the other way).
  struct BP { const char* name; int64_t B, M, N, K; bool ta, tb; int shared; bool sum; };
  for (BP q : {BP{"mamba130m_in_proj_x", 16, 1536, 2048, 768, false, true, 1, false},
               BP{"mamba130m_x_proj", 16, 80, 2048, 1536, false, false, 1, false},
               BP{"mamba130m_in_proj_dw", 16, 1536, 768, 2048, false, false, 0, true},
               BP{"mamba1.4b_in_proj_dw", 4, 4096, 2048, 2048, false, false, 0, true},
               BP{"mamba1.4b_out_proj_dw", 4, 2048, 4096, 2048, true, true, 0, true}}) {
    OpCase c{"matmul", str(q.sum ? "matmul_batch_sum_perf(bf16," : "matmul_batched_perf(bf16,", q.name, ",B=", q.B,
                           ",M=", q.M, ",N=", q.N, ",K=", q.K, ")")};
    c.perf = [=](const Ctx& ctx) {
      const DType dt = DType::bf16;
      const int64_t Ba = q.shared == 1 ? 1 : q.B;
      const Shape sa = q.ta ? Shape{Ba, q.K, q.M} : Shape{Ba, q.M, q.K};
      const Shape sb = q.tb ? Shape{q.B, q.N, q.K} : Shape{q.B, q.K, q.N};
      Tensor a = make(rand_normal(size_t(Ba * q.M * q.K), ctx.seed, 1, 1.f, dt), sa, dt, ctx.device);
      Tensor b = make(rand_normal(size_t(q.B * q.K * q.N), ctx.seed, 2, 1.f, dt), sb, dt, ctx.device);
      Tensor y = q.sum ? Tensor::zeros({q.M, q.N}, DType::f32, ctx.device)
                       : Tensor::empty({q.B, q.M, q.N}, dt, ctx.device);
      PerfResult r;
      if (q.sum)
        r.us = time_us(ctx, [&] { matmul_batch_sum(a, b, y, q.ta, q.tb, 1.f, 1.f); });
      else
        r.us = time_us(ctx, [&] { matmul_batched(a, b, y, q.ta, q.tb); });
      r.flops = 2.0 * double(q.B) * double(q.M) * double(q.N) * double(q.K);
      r.bytes = double(a.nbytes() + b.nbytes() + y.nbytes());
      return r;
    };
    out.push_back(c);
  }
  struct NK { int64_t N, K; const char* name; };
  for (NK nk : {NK{4096, 4096, "o"}, NK{6144, 4096, "qkv"}, NK{28672, 4096, "gate_up"}, NK{4096, 14336, "down"}})
    for (int64_t M : {1, 4, 16, 32, 64})
      perf_case(str("matmul_perf(bf16,llama8b_", nk.name, ",M=", M, ",N=", nk.N, ",K=", nk.K, ")"), M, nk.N, nk.K,
                true);
  perf_case("matmul_perf(bf16,llama8b_lm_head,M=1,N=128256,K=4096)", 1, 128256, 4096, true);
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  add_matmul_cases(out);
  add_batched_cases(out);
  add_linear_cases(out);
  add_error_case(out);
  add_perf_cases(out);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
