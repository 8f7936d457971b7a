#include "fp8_check.h"
#include "harness.h"
#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/rms_norm/rms_norm.h"

namespace anvil::test {
namespace {

constexpr float kEps = 1e-5f;

std::vector<double> rounded(const std::vector<double>& v, DType dt) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); i++) r[i] = round_to(dt, float(v[i]));
  return r;
}

std::string id_of(const char* what, DType dt, DType yt, int64_t N, int64_t C) {
  std::string types = yt == dt ? dtype_name(dt) : str(dtype_name(dt), "->", dtype_name(yt));
  return str(what, "(", types, ",", shape_str({N, C}), ",eps=1e-5)");
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  struct S { int64_t N, C; };
  // C = 7, 100, 1001: the loop kernel (no 16-byte packs for bf16/f16); 1000, 4096, 8200: the register path
  // with K = 1, 2, 4 packs per thread (bf16); 16384: K = 4 with 512 threads; 20000: the two-pass loop over
  // 16-byte packs (too wide for registers).
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (DType yt : {dt, DType::e4m3fn, DType::e4m3fnuz})
      for (S s : {S{1, 7}, S{3, 100}, S{5, 1000}, S{2, 1001}, S{64, 4096}, S{2, 8200}, S{3, 16384}, S{2, 20000}}) {
        const bool fp8 = dtype_is_fp8(yt);
        if (fp8 && s.N * s.C < 1000) continue;
        OpCase c{"add_rms_norm", id_of("add_rms_norm", dt, yt, s.N, s.C)};
        // FP8: w in [0.5, 1.5] and the scale 1/64 put the largest |y| near 4 * 1.5 * 64 = 384: past 240
        // (e4m3fnuz saturates) and near 448.
        const float scale = 1.f / 64;
        c.test = [=](const Ctx& ctx) {
          const size_t n = size_t(s.N * s.C);
          auto a = rand_normal(n, ctx.seed, 1, 1.f, dt), b = rand_normal(n, ctx.seed, 2, 1.f, dt);
          auto w = rand_uniform(size_t(s.C), ctx.seed, 3, 0.5f, 1.5f, dt);
          Tensor ta = make(a, {s.N, s.C}, dt, ctx.device), tb = make(b, {s.N, s.C}, dt, ctx.device);
          Tensor tw = make(w, {s.C}, dt, ctx.device), th = Tensor::empty({s.N, s.C}, dt, ctx.device);
          Tensor ty = Tensor::empty({s.N, s.C}, yt, ctx.device), tr = Tensor::empty({s.N}, DType::f32, ctx.device);
          Tensor tscale = fp8 ? make({scale}, {1}, DType::f32, ctx.device) : Tensor();
          add_rms_norm_fwd(ta, tb, tw, kEps, th, ty, tr, tscale);
          // Reference: h in fp64; y and rstd from h rounded into the dtype, as the contract says.
          std::vector<double> rh(n), ry(n), rr(size_t(s.N));
          add_rms_norm_fwd_ref(to_double(a).data(), to_double(b).data(), to_double(w).data(), rh.data(), ry.data(),
                               rr.data(), s.N, s.C, kEps);
          const std::vector<double> hq = rounded(rh, dt);
          rms_norm_fwd_ref(hq.data(), to_double(w).data(), ry.data(), rr.data(), s.N, s.C, kEps);
          std::vector<Check> r = {compare("h", th, rh, derived_tol(dt, 1, 2)),
                                  compare("rstd", tr, rr, derived_tol(DType::f32, double(s.C), 2))};
          if (fp8) {
            for (double& v : ry) v /= scale;
            r.push_back(compare_fp8("y", ty, ry));
            return r;
          }
          r.push_back(compare("y", ty, ry, derived_tol(dt, double(s.C), 2)));
          // In place: h = b (the decode residual update).
          add_rms_norm_fwd(ta, tb, tw, kEps, tb, ty, tr);
          r.push_back(compare("h (in place, h = b)", tb, rh, derived_tol(dt, 1, 2)));
          r.push_back(compare("y (in place, h = b)", ty, ry, derived_tol(dt, double(s.C), 2)));

          // Backward from the rounded h, with and without the residual gradient; then dh = dh_in in place.
          auto dy = rand_normal(n, ctx.seed, 4, 1.f, dt), dres = rand_normal(n, ctx.seed, 5, 1.f, dt);
          auto dw0 = rand_normal(size_t(s.C), ctx.seed, 6, 1.f, DType::f32);  // dw accumulates: start non-zero
          Tensor tdy = make(dy, {s.N, s.C}, dt, ctx.device), tres = make(dres, {s.N, s.C}, dt, ctx.device);
          Tensor tdh = Tensor::empty({s.N, s.C}, dt, ctx.device), tdw = make(dw0, {s.C}, DType::f32, ctx.device);
          add_rms_norm_bwd(tdy, tres, th, tw, tr, tdh, tdw);
          std::vector<double> rdh(n), rdw = to_double(dw0);
          add_rms_norm_bwd_ref(to_double(dy).data(), to_double(dres).data(), hq.data(), to_double(w).data(), rr.data(),
                               rdh.data(), rdw.data(), s.N, s.C);
          // |dh| ~ |dh_in| + |rms_norm part|: the same k_len as rms_norm's dx.
          r.push_back(compare("dh", tdh, rdh, derived_tol(dt, double(s.C), 3)));
          r.push_back(compare("dw", tdw, rdw, derived_tol(DType::f32, double(s.C + s.N), 3)));
          add_rms_norm_bwd(tdy, Tensor(), th, tw, tr, tdh, tdw);
          std::vector<double> rdh0(n), rdw2 = rdw;
          add_rms_norm_bwd_ref(to_double(dy).data(), nullptr, hq.data(), to_double(w).data(), rr.data(), rdh0.data(),
                               rdw2.data(), s.N, s.C);
          r.push_back(compare("dh (no dh_in)", tdh, rdh0, derived_tol(dt, double(s.C), 3)));
          r.push_back(compare("dw (twice)", tdw, rdw2, derived_tol(DType::f32, double(s.C + 2 * s.N), 3)));
          add_rms_norm_bwd(tdy, tres, th, tw, tr, tres, tdw);
          r.push_back(compare("dh (in place, dh = dh_in)", tres, rdh, derived_tol(dt, double(s.C), 3)));
          return r;
        };
        if (!fp8 && dt == DType::f32 && s.N * s.C <= 1000) {
          c.grad = [=](const Ctx& ctx) {
            const size_t n = size_t(s.N * s.C);
            auto a = to_double(rand_normal(n, ctx.seed, 1, 1.f, DType::f32));
            auto b = to_double(rand_normal(n, ctx.seed, 2, 1.f, DType::f32));
            auto w = to_double(rand_uniform(size_t(s.C), ctx.seed, 3, 0.5f, 1.5f, DType::f32));
            auto gy = to_double(rand_normal(n, ctx.seed, 4, 1.f, DType::f32));
            auto gh = to_double(rand_normal(n, ctx.seed, 5, 1.f, DType::f32));
            // Both outputs carry a gradient: L = sum(y * gy) + sum(h * gh), so dL/da = dh with dh_in = gh.
            std::vector<double> g = gy;
            g.insert(g.end(), gh.begin(), gh.end());
            auto fwd = [&](const std::vector<double>& aa, const std::vector<double>& ww) {
              std::vector<double> h(n), y(n), r(size_t(s.N));
              add_rms_norm_fwd_ref(aa.data(), b.data(), ww.data(), h.data(), y.data(), r.data(), s.N, s.C, kEps);
              y.insert(y.end(), h.begin(), h.end());
              return y;
            };
            std::vector<double> h(n), y(n), r(size_t(s.N)), dh(n), dw(size_t(s.C), 0.0);
            add_rms_norm_fwd_ref(a.data(), b.data(), w.data(), h.data(), y.data(), r.data(), s.N, s.C, kEps);
            add_rms_norm_bwd_ref(gy.data(), gh.data(), h.data(), w.data(), r.data(), dh.data(), dw.data(), s.N, s.C);
            // Central differences in fp64 with h=1e-6 err by ~1e-9 relative; 1e-6 is a safe bound.
            return std::vector<Check>{
                compare("dh vs finite differences (da)", std::vector<float>(dh.begin(), dh.end()),
                        finite_diff([&](const std::vector<double>& x) { return fwd(x, w); }, a, g), 1e-6),
                compare("dw vs finite differences", std::vector<float>(dw.begin(), dw.end()),
                        finite_diff([&](const std::vector<double>& x) { return fwd(a, x); }, w, g), 1e-6)};
          };
        }
        out.push_back(c);
      }

  // Perf: a Llama-3-8B layer's residual step for 8192 training tokens, and for one decode token.
  for (int64_t N : {int64_t(8192), int64_t(1)})
    for (DType yt : {DType::bf16, DType::e4m3fn}) {
      const DType dt = DType::bf16;
      OpCase c{"add_rms_norm", id_of("add_rms_norm", dt, yt, N, 4096)};
      c.perf = [=](const Ctx& ctx) {
        const int64_t C = 4096;
        Tensor a = make(rand_normal(size_t(N * C), ctx.seed, 1, 1.f, dt), {N, C}, dt, ctx.device);
        Tensor b = make(rand_normal(size_t(N * C), ctx.seed, 2, 1.f, dt), {N, C}, dt, ctx.device);
        Tensor w = make(rand_uniform(size_t(C), ctx.seed, 3, 0.5f, 1.5f, dt), {C}, dt, ctx.device);
        Tensor h = Tensor::empty({N, C}, dt, ctx.device), y = Tensor::empty({N, C}, yt, ctx.device);
        Tensor r = Tensor::empty({N}, DType::f32, ctx.device);
        Tensor scale = dtype_is_fp8(yt) ? make({0.05f}, {1}, DType::f32, ctx.device) : Tensor();
        PerfResult p;
        p.us = time_us(ctx, [&] { add_rms_norm_fwd(a, b, w, kEps, h, y, r, scale); });
        // a, b, w read once; h, y (and rstd) written once.
        p.bytes = double(N * C) * (3 * dtype_size(dt) + dtype_size(yt)) + double(C) * dtype_size(dt) + 4.0 * N;
        if (N == 1 && ctx.device.is_gpu()) {
          // One decode token: 64 launches back to back in a graph, each on its own tensors (weight included).
          constexpr int kCount = 64;
          std::vector<Tensor> as, bs, ws, hs, ys, rs;
          for (int i = 0; i < kCount; i++) {
            as.push_back(a.clone()), bs.push_back(b.clone()), ws.push_back(w.clone());
            hs.push_back(Tensor::empty({N, C}, dt, ctx.device)), ys.push_back(Tensor::empty({N, C}, yt, ctx.device));
            rs.push_back(Tensor::empty({N}, DType::f32, ctx.device));
          }
          p.graph_us = time_us_graph(ctx, kCount, [&](int i) {
            const size_t k = size_t(i);
            add_rms_norm_fwd(as[k], bs[k], ws[k], kEps, hs[k], ys[k], rs[k], scale);
          });
        }
        return p;
      };
      out.push_back(c);
    }
  OpCase b{"add_rms_norm", id_of("add_rms_norm_bwd", DType::bf16, DType::bf16, 8192, 4096)};
  b.perf = [](const Ctx& ctx) {
    const int64_t N = 8192, C = 4096;
    const DType dt = DType::bf16;
    Tensor dy = make(rand_normal(size_t(N * C), ctx.seed, 4, 1.f, dt), {N, C}, dt, ctx.device);
    Tensor dres = make(rand_normal(size_t(N * C), ctx.seed, 5, 1.f, dt), {N, C}, dt, ctx.device);
    Tensor h = make(rand_normal(size_t(N * C), ctx.seed, 1, 1.f, dt), {N, C}, dt, ctx.device);
    Tensor w = make(rand_uniform(size_t(C), ctx.seed, 3, 0.5f, 1.5f, dt), {C}, dt, ctx.device);
    Tensor r = make(rand_uniform(size_t(N), ctx.seed, 6, 0.5f, 1.5f, DType::f32), {N}, DType::f32, ctx.device);
    Tensor dh = Tensor::empty({N, C}, dt, ctx.device), dw = Tensor::zeros({C}, DType::f32, ctx.device);
    PerfResult p;
    p.us = time_us(ctx, [&] { add_rms_norm_bwd(dy, dres, h, w, r, dh, dw); });
    p.bytes = double(N * C) * 4 * dtype_size(dt) + double(C) * (dtype_size(dt) + 8) + 4.0 * N;  // dy, dh_in, h, dh
    return p;
  };
  out.push_back(b);
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
