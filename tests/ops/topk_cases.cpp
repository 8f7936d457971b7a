// topk_rows: the k best (id, logit) pairs per row in the sampler's order, the finite counts and the bad-row
// codes, exact against the reference (a full sort).
#include <cmath>

#include "harness.h"
#include "kernels/topk/topk.h"

namespace anvil::test {
namespace {

enum class Plant { none, ties, nan, masked, signed_zero, sawtooth };

struct S {
  int64_t R, V;
  int k;
  Plant plant;
};

std::string plant_name(Plant p) {
  switch (p) {
    case Plant::none: return "";
    case Plant::ties: return ",ties";
    case Plant::nan: return ",nan";
    case Plant::masked: return ",-inf mask";
    case Plant::signed_zero: return ",+-0";
    case Plant::sawtooth: return ",sawtooth";
  }
  return "";
}

// Logits rounded to a coarse grid (many equal values, so the id order of ties is exercised everywhere), with
// plants whose columns depend on the row and fall into different spans (2048 columns each on the GPU).
std::vector<float> make_logits(const S& s, uint64_t seed) {
  auto x = rand_normal(size_t(s.R * s.V), seed, 1, 3.f, DType::f32);
  for (auto& v : x) v = std::round(v * 8.f) / 8.f;
  for (int64_t r = 0; r < s.R; r++) {
    float* row = x.data() + r * s.V;
    const int64_t a = (r * 7919 + 5) % s.V, b = (r * 104729 + s.V / 2) % s.V;
    switch (s.plant) {
      case Plant::none: break;
      case Plant::ties:  // more equal maxima than k spread over the row: the lowest ids must win
        for (int64_t c = r % 3; c < s.V; c += s.V / (2 * s.k) + 1) row[c] = 50.f;
        break;
      case Plant::nan: row[a] = NAN; row[b] = INFINITY; break;
      case Plant::masked:  // fewer finite logits than k
        for (int64_t c = 0; c < s.V; c++)
          if (c % (s.V / (s.k / 2 + 1) + 1) != 0) row[c] = -INFINITY;
        break;
      case Plant::signed_zero:  // the best values are +0 and -0, which are equal
        for (int64_t c = 0; c < s.V; c++) row[c] = -std::fabs(row[c]) - 1.f;
        row[a] = -0.f, row[b] = 0.f;
        break;
      case Plant::sawtooth:  // -(c mod 2048): the GPU's spans (2048 columns) all hold the same k best values,
        // so ~(k - 1) keys of every span pass the merge's tau: 16k at k = 256, past one merge buffer (4096
        // keys), which sends the GPU merge through its rounds over all keys
        for (int64_t c = 0; c < s.V; c++) row[c] = -float(c % 2048);
        break;
    }
  }
  return x;
}

Check equal_vals(const Tensor& t, const std::vector<double>& ref) {
  const std::vector<float> v = t.to_floats();
  for (size_t i = 0; i < ref.size(); i++)
    if (double(v[i]) != ref[i]) return {false, str("vals[", i, "] = ", v[i], ", expected ", ref[i])};
  return {true, str("vals: ", ref.size(), " equal")};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  const std::vector<S> shapes = {
      {1, 1, 1, Plant::none},          {1, 7, 4, Plant::none},        {3, 100, 40, Plant::ties},
      {2, 4097, 40, Plant::ties},      {1, 128256, 40, Plant::none},  {1, 128256, 40, Plant::ties},
      {1, 128256, 256, Plant::ties},   {4, 32000, 64, Plant::none},   {3, 10001, 40, Plant::nan},
      {2, 5000, 40, Plant::masked},    {2, 9000, 8, Plant::signed_zero}, {8, 50257, 50, Plant::none},
      {1, 128256, 256, Plant::sawtooth},
  };
  for (const S& s : shapes) {
    OpCase c{"topk", str("topk_rows(", shape_str({s.R, s.V}), ",k=", s.k, plant_name(s.plant), ")")};
    c.test = [=](const Ctx& ctx) {
      const auto x = make_logits(s, ctx.seed);
      const size_t n = size_t(s.R * s.k);
      std::vector<int32_t> ids(n), fin(size_t(s.R)), bad(size_t(s.R));
      std::vector<double> vals(n);
      topk_rows_ref(to_double(x).data(), s.R, s.V, s.k, ids.data(), vals.data(), fin.data(), bad.data());
      const Device d = ctx.device;
      Tensor tx = make(x, {s.R, s.V}, DType::f32, d);
      Tensor tids = Tensor::empty({s.R, s.k}, DType::i32, d), tvals = Tensor::empty({s.R, s.k}, DType::f32, d);
      Tensor tfin = Tensor::empty({s.R}, DType::i32, d), tbad = Tensor::empty({s.R}, DType::i32, d);
      topk_rows(tx, s.k, tids, tvals, tfin, tbad);
      // Values are copies of inputs: exact, -inf padding included.
      std::vector<Check> checks{equal_ints("ids", tids, ids), equal_vals(tvals, vals),
                                equal_ints("finite", tfin, fin), equal_ints("bad", tbad, bad)};
      bool planted = true;  // the plants did what they are for
      for (int64_t r = 0; r < s.R; r++) {
        if (s.plant == Plant::nan) planted = planted && bad[size_t(r)] >= 0;
        if (s.plant == Plant::masked) planted = planted && fin[size_t(r)] < s.k && fin[size_t(r)] > 0;
        if (s.plant == Plant::ties) planted = planted && vals[size_t(r * s.k + s.k - 1)] == 50.0;
      }
      checks.push_back({planted, "the planted rows are what the case is named after"});
      return checks;
    };
    if (s.R == 1 && s.V == 128256 && s.plant == Plant::none) {
      c.perf = [=](const Ctx& ctx) {
        const Device d = ctx.device;
        Tensor tx = make(make_logits(s, ctx.seed), {s.R, s.V}, DType::f32, d);
        Tensor tids = Tensor::empty({s.R, s.k}, DType::i32, d), tvals = Tensor::empty({s.R, s.k}, DType::f32, d);
        Tensor tfin = Tensor::empty({s.R}, DType::i32, d), tbad = Tensor::empty({s.R}, DType::i32, d);
        PerfResult r;
        r.us = time_us(ctx, [&] { topk_rows(tx, s.k, tids, tvals, tfin, tbad); });
        r.bytes = double(s.R * s.V) * 4.0;
        return r;
      };
    }
    out.push_back(c);
  }
  {
    OpCase c{"topk", "topk_rows(errors)"};
    c.test = [](const Ctx& ctx) {
      const Device d = ctx.device;
      Tensor x = Tensor::zeros({2, 10}, DType::f32, d), ids = Tensor::empty({2, 4}, DType::i32, d);
      Tensor vals = Tensor::empty({2, 4}, DType::f32, d), fin = Tensor::empty({2}, DType::i32, d);
      Tensor bad = Tensor::empty({2}, DType::i32, d), xb = Tensor::zeros({2, 10}, DType::bf16, d);
      Tensor ids5 = Tensor::empty({2, 5}, DType::i32, d), valsi = Tensor::empty({2, 4}, DType::i32, d);
      return std::vector<Check>{
          expect_error("bf16 logits", "logits of dtype f32", [&] { topk_rows(xb, 4, ids, vals, fin, bad); }),
          expect_error("k = 0", "1 <= k <= 256", [&] { topk_rows(x, 0, ids, vals, fin, bad); }),
          expect_error("k past 256", "1 <= k <= 256", [&] { topk_rows(x, 257, ids, vals, fin, bad); }),
          expect_error("ids of another k", "ids of shape [2,4]", [&] { topk_rows(x, 4, ids5, vals, fin, bad); }),
          expect_error("i32 vals", "vals of dtype f32", [&] { topk_rows(x, 4, ids, valsi, fin, bad); })};
    };
    out.push_back(c);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
