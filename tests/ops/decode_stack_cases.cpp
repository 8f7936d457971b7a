// decode_stack's front-end: which models it refuses, with the reason named (the models then run their per-op
// step). Its numerics are checked at the model level, against the per-op step, in tests/models/decode_stack_test.cpp
// (GPU only); here the refusals, on either backend, and on a GPU with bulk copies the acceptance of a valid model.
#include "harness.h"
#include "kernels/decode_stack/decode_stack.h"

namespace anvil::test {
namespace {

struct Small {
  DecodeStackShape s;
  std::vector<DecodeStackLayer> layers;
};

// A 2-layer model: C 128, NH 4, NKV 1, HD 32, H 128, a cache of 16 rows; weights bf16 or e4m3fn with per-row
// scales (FP8 widths are multiples of 128: the tensor-core tiles read 128-byte blocks).
Small small(const Ctx& ctx, DType wdt) {
  Small m;
  m.s.C = 128, m.s.NH = 4, m.s.NKV = 1, m.s.HD = 32, m.s.H = 128;
  const int64_t QD = 128, KVD = 32;
  auto lin = [&](int64_t rows, int64_t cols) {
    Tensor w = make(rand_normal(size_t(rows * cols), ctx.seed, uint64_t(rows * 7 + cols), 0.05f, DType::bf16),
                    {rows, cols}, DType::bf16, ctx.device);
    if (wdt == DType::bf16) return DecodeStackWeight{w, Tensor()};
    return DecodeStackWeight{Tensor::zeros({rows, cols}, DType::e4m3fn, ctx.device),
                             make(std::vector<float>(size_t(rows), 0.01f), {rows}, DType::f32, ctx.device)};
  };
  for (int l = 0; l < 2; l++) {
    DecodeStackLayer d;
    d.qkv = lin(QD + 2 * KVD, 128), d.o = lin(128, QD), d.gate_up = lin(256, 128), d.down = lin(128, 128);
    d.in_norm = make(std::vector<float>(128, 1.f), {128}, DType::bf16, ctx.device);
    d.post_norm = make(std::vector<float>(128, 1.f), {128}, DType::bf16, ctx.device);
    d.k_cache = Tensor::zeros({1, 16, 1, 32}, DType::bf16, ctx.device);
    d.v_cache = Tensor::zeros({1, 16, 1, 32}, DType::bf16, ctx.device);
    m.layers.push_back(d);
  }
  return m;
}

std::vector<Check> refusals(const Ctx& ctx, DType wdt) {
  std::vector<Check> out;
  auto refused = [&](const std::string& what, const Small& m, const std::string& needle) {
    const std::string why = decode_stack_unsupported(m.s, m.layers);
    Check c;
    c.ok = why.find(needle) != std::string::npos;
    c.detail = str(what, ": ", c.ok ? "refused" : "expected a refusal naming '" + needle + "'", " (\"", why, "\")");
    out.push_back(c);
  };
  Small m = small(ctx, wdt);
  {
    Small b = m;
    b.s.HD = 48;
    refused("head dim 48", b, "head dim 32, 64 or 128");
  }
  {
    Small b = m;
    b.s.NH = 6, b.s.NKV = 2;
    refused("GQA 3", b, "NH / NKV in {1, 2, 4, 8}");
  }
  {
    Small b = m;
    b.layers[1].o.w = Tensor::zeros({128, 32}, wdt, ctx.device);
    refused("o weight of the wrong shape", b, "a contiguous weight of [128,128]");
  }
  {
    Small b = m;
    b.layers[0].down.w = Tensor::zeros({128, 128}, wdt == DType::bf16 ? DType::f16 : DType::bf16, ctx.device);
    refused("mixed weight dtypes", b, "one weight dtype in every projection");
  }
  {
    Small b = m;
    b.layers[0].v_cache = Tensor::zeros({2, 16, 1, 32}, DType::bf16, ctx.device);
    refused("a batch-2 cache", b, "bf16 caches of (1, Tmax, 1, 32)");
  }
  if (wdt != DType::bf16) {
    Small b = m;
    b.layers[0].qkv.scale = make(std::vector<float>(5, 0.01f), {5}, DType::f32, ctx.device);
    refused("FP8 scales of (5)", b, "f32 weight scales of (1) or (192)");
    b.layers[0].qkv.scale = Tensor();
    refused("FP8 without scales", b, "f32 weight scales of (1) or (192)");
    Small w = m;
    w.s.H = 144;
    refused("FP8 with H 144", w, "multiples of 128");
  }
  const std::string why = decode_stack_unsupported(m.s, m.layers);
  if (ctx.device.is_cpu()) {
    refused("a CPU model", m, "a GPU model");
    out.push_back(expect_error("DecodeStack on a CPU model", "a GPU model",
                               [&] { DecodeStack st(m.s, m.layers, Tensor::zeros({16}, DType::f32)); }));
  } else {
    Check c;  // accepted, or refused for the device (no bulk copies / too little shared memory) only
    c.ok = why.empty() || why.find("bulk") != std::string::npos || why.find("shared memory") != std::string::npos;
    c.detail = str("valid model on this GPU: ", why.empty() ? "accepted" : "refused: " + why);
    out.push_back(c);
  }
  return out;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType wdt : {DType::bf16, DType::e4m3fn}) {
    OpCase c;
    c.op = "decode_stack";
    c.id = str("decode_stack_refusals(", dtype_name(wdt), ")");
    c.test = [wdt](const Ctx& ctx) { return refusals(ctx, wdt); };
    out.push_back(std::move(c));
  }
  return out;
}

Registrar reg(cases);

}  // namespace
}  // namespace anvil::test
