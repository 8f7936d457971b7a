// argmax_rows: the greedy pick per logits row and the bad-row codes, exact against the reference.
#include <cmath>

#include "harness.h"
#include "kernels/argmax/argmax.h"

namespace anvil::test {
namespace {

// What a row holds besides normal values.
enum class Plant { none, ties, nan, inf, nan_and_inf, all_neg_inf, masked };

struct S {
  int64_t R, V;
  Plant plant;
};

std::string plant_name(Plant p) {
  switch (p) {
    case Plant::none: return "";
    case Plant::ties: return ",ties";
    case Plant::nan: return ",nan";
    case Plant::inf: return ",+inf";
    case Plant::nan_and_inf: return ",nan+inf";
    case Plant::all_neg_inf: return ",all -inf";
    case Plant::masked: return ",-inf mask";
  }
  return "";
}

// Normal logits, then per row r the planted values at columns that depend on r, so the rows differ and the
// interesting columns fall into different blocks' spans (4096 columns each on the GPU).
std::vector<float> make_logits(const S& s, uint64_t seed) {
  auto x = rand_normal(size_t(s.R * s.V), seed, 1, 3.f, DType::f32);
  for (int64_t r = 0; r < s.R; r++) {
    float* row = x.data() + r * s.V;
    const int64_t a = (r * 7919 + 5) % s.V, b = (r * 104729 + s.V / 2) % s.V, lo = std::min(a, b);
    switch (s.plant) {
      case Plant::none: break;
      case Plant::ties: row[a] = row[b] = 100.f; break;  // the lower column must win
      case Plant::nan: row[a] = NAN; row[b] = 100.f; break;
      case Plant::inf: row[a] = INFINITY; break;
      case Plant::nan_and_inf: row[a] = NAN; row[b] = INFINITY; (void)lo; break;
      case Plant::all_neg_inf:
        for (int64_t c = 0; c < s.V; c++) row[c] = -INFINITY;
        break;
      case Plant::masked:  // all but two columns masked: the best of the two
        for (int64_t c = 0; c < s.V; c++)
          if (c != a && c != b) row[c] = -INFINITY;
        if (a != b) row[b] = row[a] - 1.f;
        break;
    }
  }
  return x;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  const std::vector<S> shapes = {
      {1, 1, Plant::none},           {1, 7, Plant::none},          {3, 4096, Plant::none},
      {2, 4097, Plant::ties},        {1, 128256, Plant::none},     {1, 128256, Plant::ties},
      {4, 32000, Plant::ties},       {3, 10001, Plant::nan},       {2, 128256, Plant::inf},
      {3, 9000, Plant::nan_and_inf}, {2, 5000, Plant::all_neg_inf}, {3, 12345, Plant::masked},
      {8, 50257, Plant::none},
  };
  for (const S& s : shapes) {
    OpCase c{"argmax", str("argmax_rows(", shape_str({s.R, s.V}), plant_name(s.plant), ")")};
    c.test = [=](const Ctx& ctx) {
      const auto x = make_logits(s, ctx.seed);
      std::vector<int32_t> ids(size_t(s.R)), bad(size_t(s.R));
      argmax_rows_ref(to_double(x).data(), s.R, s.V, ids.data(), bad.data());
      Tensor tx = make(x, {s.R, s.V}, DType::f32, ctx.device);
      Tensor tids = Tensor::empty({s.R, 1}, DType::i32, ctx.device);
      Tensor tbad = Tensor::empty({s.R}, DType::i32, ctx.device);
      argmax_rows(tx, tids, tbad);
      std::vector<Check> checks{equal_ints("ids", tids, ids), equal_ints("bad", tbad, bad)};
      // The plants must have done what they are for, or the case tests less than its name says.
      bool planted = true;
      for (int64_t r = 0; r < s.R; r++) {
        const bool flagged = bad[size_t(r)] >= 0;
        planted = planted && (flagged == (s.plant == Plant::nan || s.plant == Plant::inf ||
                                          s.plant == Plant::nan_and_inf || s.plant == Plant::all_neg_inf));
      }
      checks.push_back({planted, "reference flags exactly the planted rows"});
      return checks;
    };
    if (s.R == 1 && s.V == 128256 && s.plant == Plant::none) {
      c.perf = [=](const Ctx& ctx) {
        Tensor tx = make(make_logits(s, ctx.seed), {s.R, s.V}, DType::f32, ctx.device);
        Tensor tids = Tensor::empty({s.R, 1}, DType::i32, ctx.device);
      Tensor tbad = Tensor::empty({s.R}, DType::i32, ctx.device);
        PerfResult r;
        r.us = time_us(ctx, [&] { argmax_rows(tx, tids, tbad); });
        r.bytes = double(s.R * s.V) * 4.0;
        return r;
      };
    }
    out.push_back(c);
  }
  {
    OpCase c{"argmax", "argmax_rows(errors)"};
    c.test = [](const Ctx& ctx) {
      const Device d = ctx.device;
      Tensor x = Tensor::zeros({2, 10}, DType::f32, d), ids = Tensor::empty({2, 1}, DType::i32, d);
      Tensor bad = Tensor::empty({2}, DType::i32, d);
      Tensor xb = Tensor::zeros({2, 10}, DType::bf16, d), x1 = Tensor::zeros({10}, DType::f32, d);
      Tensor ids3 = Tensor::empty({3}, DType::i32, d), bad3 = Tensor::empty({3}, DType::i32, d);
      Tensor idsf = Tensor::empty({2, 1}, DType::f32, d), xt = Tensor::zeros({10, 2}, DType::f32, d).transpose(0, 1);
      return std::vector<Check>{
          expect_error("bf16 logits", "logits of dtype f32", [&] { argmax_rows(xb, ids, bad); }),
          expect_error("1-D logits", "logits with 2 dimensions", [&] { argmax_rows(x1, ids, bad); }),
          expect_error("ids per row", "ids of 2 elements, one per logits row", [&] { argmax_rows(x, ids3, bad); }),
          expect_error("bad per row", "bad of shape [2]", [&] { argmax_rows(x, ids, bad3); }),
          expect_error("f32 ids", "ids of dtype i32", [&] { argmax_rows(x, idsf, bad); }),
          expect_error("strided logits", "contiguous", [&] { argmax_rows(xt, ids, bad); }),
          {argmax_bad_reason(6, 10) == "nan at id 3" && argmax_bad_reason(7, 10) == "inf at id 3" &&
               argmax_bad_reason(20, 10) == "every logit -inf" && argmax_bad_reason(-1, 10).empty(),
           "bad codes in words"}};
    };
    out.push_back(c);
  }
  return out;
}
Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
