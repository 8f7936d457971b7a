// decode_stack (every layer of a batch-1 decode step in one persistent launch) against the per-op step
// (ANVIL_DECODE_STACK=0): the same tokens fed to both, logits compared at every step. GPU only; on a device
// without bulk copies the model keeps its per-op step and the comparison is between two identical paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "io/hf_config.h"
#include "kernels/quantize/quantize.h"
#include "models/llama/llama.h"

namespace anvil {
namespace {

// Logits after a prompt of `prompt` tokens and after each of `ids` fed one per step.
std::vector<std::vector<float>> run(LlamaModel& m, int prompt, const std::vector<int>& ids, bool stack) {
  if (stack) unsetenv("ANVIL_DECODE_STACK");
  else setenv("ANVIL_DECODE_STACK", "0", 1);
  const int64_t V = m.info().vocab;
  auto st = m.new_state(1, prompt + int(ids.size()) + 1);
  Tensor logits = Tensor::empty({1, V}, DType::f32, m.device());
  std::vector<float> p;
  for (int i = 0; i < prompt; i++) p.push_back(float((i * 37 + 11) % V));
  m.step(*st, Tensor::from_floats(p, {1, int64_t(prompt)}, DType::i32, Device::cpu()), logits);
  std::vector<std::vector<float>> out{logits.to_floats()};
  for (int id : ids) {
    m.step(*st, Tensor::from_floats({float(id)}, {1, 1}, DType::i32, Device::cpu()), logits);
    out.push_back(logits.to_floats());
  }
  unsetenv("ANVIL_DECODE_STACK");
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    num += double(a[i] - ref[i]) * double(a[i] - ref[i]);
    den += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(num / den);
}

void compare(LlamaModel& m, int prompt, const char* what) {
  std::vector<int> ids;
  for (int i = 0; i < 10; i++) ids.push_back((i * 101 + 3) % int(m.info().vocab));
  const auto ref = run(m, prompt, ids, false);
  const auto got = run(m, prompt, ids, true);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t s = 1; s < ref.size(); s++) {  // [0] is the prefill: the same kernels on both sides
    const double rel = rel_l2(got[s], ref[s]);
    std::printf("%s, context %zu: decode_stack vs per-op step, relative L2 %.2e\n", what, prompt + s, rel);
    // Both round every activation to bf16, in the same places, but sum in other orders: bf16 noise
    // (~2^-8 relative per rounding, a few roundings per layer); a wrong residual, norm or head is O(1).
    EXPECT_LT(rel, 2e-2) << what << ", decode step " << s;
  }
}

LlamaConfig small_config(int64_t NH, int64_t NKV, int64_t HD) {
  LlamaConfig c;
  c.vocab_size = 512, c.hidden_size = 512, c.intermediate_size = 1024, c.num_hidden_layers = 3;
  c.num_attention_heads = NH, c.num_key_value_heads = NKV, c.head_dim = HD, c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-5, c.initializer_range = 0.1;
  return c;
}

TEST(DecodeStack, MatchesPerOpStepBf16) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  // GQA 4 at HD 128 (the 8B shape class) and GQA 2 at HD 64. Contexts of 6-15 take one attention split with a
  // block per q-head (attn_split), and with ANVIL_DECODE_STACK_HEAD_SPLIT=0 a block per kv-head; 151-160 two row
  // splits of at least kAttnRows = 128 rows, combined by the last block of each group.
  auto m = LlamaModel::create(small_config(8, 2, 128), Device::gpu(0), DType::bf16, false, 5);
  compare(*m, 5, "bf16 HD 128 GQA 4");
  setenv("ANVIL_DECODE_STACK_HEAD_SPLIT", "0", 1);
  compare(*m, 5, "bf16 HD 128 GQA 4, a block per kv-head");
  unsetenv("ANVIL_DECODE_STACK_HEAD_SPLIT");
  compare(*m, 150, "bf16 HD 128 GQA 4");
  auto m2 = LlamaModel::create(small_config(8, 4, 64), Device::gpu(0), DType::bf16, false, 6);
  compare(*m2, 5, "bf16 HD 64 GQA 2");
}

// One layer of the Llama-3.1-8B shape (C 4096, H 14336, 32 q-heads, 8 kv-heads, HD 128): down's 28 KB rows are
// cut into two ring chunks, and every consumer warp takes several units of each matrix.
TEST(DecodeStack, MatchesPerOpStep8BLayer) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c = small_config(32, 8, 128);
  c.hidden_size = 4096, c.intermediate_size = 14336, c.num_hidden_layers = 2, c.initializer_range = 0.02;
  auto m = LlamaModel::create(c, Device::gpu(0), DType::bf16, false, 13);
  compare(*m, 3, "bf16 8B layer shape");
}

// The model of config c with random weights (seed), quantised to e4m3fn at load (the LM head too with fp8_head).
std::unique_ptr<LlamaModel> fp8_model(const LlamaConfig& c, uint64_t seed, bool fp8_head = false) {
  auto m = LlamaModel::create(c, Device::gpu(0), DType::bf16, false, seed);
  const std::string dir = (std::filesystem::temp_directory_path() / "anvil_decode_stack_fp8").string();
  std::filesystem::remove_all(dir);
  m->save(dir);
  auto q = LlamaModel::load(dir, Device::gpu(0), DType::bf16, false, WeightFormat::fp8, fp8_head);
  std::filesystem::remove_all(dir);
  return q;
}

// FP8 weights reach the ring pre-tiled (one linear copy per chunk) or, with ANVIL_DECODE_STACK_TILES=0, through
// tensor maps: both are compared.
void compare_both_ways(LlamaModel& m, int prompt, const char* what) {
  compare(m, prompt, what);
  setenv("ANVIL_DECODE_STACK_TILES", "0", 1);
  compare(m, prompt, (std::string(what) + ", tensor maps").c_str());
  unsetenv("ANVIL_DECODE_STACK_TILES");
}

TEST(DecodeStack, MatchesPerOpStepFp8) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  auto m = fp8_model(small_config(8, 2, 128), 9);
  compare_both_ways(*m, 70, "e4m3fn HD 128 GQA 4");
  // A later plan of the same model reads the pre-tiled copy the first one made (DecodeStack's shared_tiles).
  compare(*m, 3, "e4m3fn HD 128 GQA 4, the model's tile copy again");
  // FP8 tiles are 16 rows x 1024 columns: widths 640 and 1152 leave the tile's last blocks out of the weight (they
  // arrive as zeros, and the lanes past the width read zero x), and 640 rows over the grid leave partial tiles.
  LlamaConfig c = small_config(8, 2, 64);
  c.hidden_size = 640, c.intermediate_size = 1152;
  compare_both_ways(*fp8_model(c, 10), 9, "e4m3fn C 640 H 1152");
}

// The 8B layer in FP8: 7 pieces per down row, 6 and 14 tiles per block in q|k|v and gate.
TEST(DecodeStack, MatchesPerOpStep8BLayerFp8) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c = small_config(32, 8, 128);
  c.hidden_size = 4096, c.intermediate_size = 14336, c.num_hidden_layers = 2, c.initializer_range = 0.02;
  compare_both_ways(*fp8_model(c, 14), 3, "e4m3fn 8B layer shape");
}

// Batch decode (2..16 rows, so the per-op step: decode_stack takes batch 1) on FP8 weights: the skinny GEMM's ring
// kernel reads the projections' pre-tiled copy (ANVIL_SKINNY_TILES=1: linear_tile_weights) or, with =0, the weights
// through tensor maps. The same bytes reach the same MMAs in the same order: identical logits.
std::vector<std::vector<float>> batch_decode(LlamaModel& m, bool tiles, std::string* path) {
  setenv("ANVIL_SKINNY_TILES", tiles ? "1" : "0", 1);
  const int64_t B = 4, V = m.info().vocab;
  auto st = m.new_state(int(B), 32);
  Tensor logits = Tensor::empty({B, V}, DType::f32, m.device());
  std::vector<float> p;
  for (int i = 0; i < B * 5; i++) p.push_back(float((i * 37 + 11) % V));
  m.step(*st, Tensor::from_floats(p, {B, 5}, DType::i32, Device::cpu()), logits);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < 6; s++) {
    std::vector<float> ids;
    for (int64_t b = 0; b < B; b++) ids.push_back(float((s * 101 + b * 13 + 3) % V));
    m.step(*st, Tensor::from_floats(ids, {B, 1}, DType::i32, Device::cpu()), logits);
    out.push_back(logits.to_floats());
  }
  unsetenv("ANVIL_SKINNY_TILES");
  *path = st->decode_path;
  return out;
}

TEST(DecodeStack, BatchFp8PretiledEqualsTensorMaps) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c = small_config(8, 2, 128);
  c.intermediate_size = 1408;  // down's rows end on a partial 1024-byte piece
  std::string with, without;
  const auto ref = batch_decode(*fp8_model(c, 21), false, &without);
  const auto got = batch_decode(*fp8_model(c, 21), true, &with);
  std::printf("decode path with tiles: %s\n", with.c_str());
  EXPECT_EQ(without.find("pre-tiled"), std::string::npos) << without;
  if (backend(Device::gpu(0)).info().bulk_copy) {
    EXPECT_NE(with.find("pre-tiled for the skinny GEMM"), std::string::npos) << with;
  }
  ASSERT_EQ(ref.size(), got.size());
  for (size_t s = 0; s < ref.size(); s++) EXPECT_EQ(ref[s], got[s]) << "decode step " << s;
}

// 17..32 rows of FP8 decode take the skinny GEMM's wide ring (three or four row groups of MMAs, x staged as f16)
// where earlier they went through the per-token quantisation and cuBLASLt. A sequence's logits must not depend on
// the batch it decodes in: 24 sequences in one batch against the same sequences as batches of 16 (two row groups)
// and 8 (one), to f32 summation-order noise. One-token prompts, so that every step (the first too) has at most 24
// rows and stays weight-only: a longer prefill of 48 or 72 rows would quantise x per token (w8a8) where 24 would
// not, and those differ by e4m3's activation rounding (~0.1 of the logits here), not by the kernels.
std::vector<std::vector<float>> decode_rows(LlamaModel& m, int64_t first, int64_t B) {
  const int64_t V = m.info().vocab;
  auto st = m.new_state(int(B), 32);
  Tensor logits = Tensor::empty({B, V}, DType::f32, m.device());
  std::vector<std::vector<float>> out;
  for (int s = 0; s < 5; s++) {
    std::vector<float> ids;
    for (int64_t b = first; b < first + B; b++) ids.push_back(float((s * 101 + b * 13 + 3) % V));
    m.step(*st, Tensor::from_floats(ids, {B, 1}, DType::i32, Device::cpu()), logits);
    out.push_back(logits.to_floats());
  }
  return out;
}

TEST(DecodeStack, BatchFp8WideRowsMatchNarrowBatches) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c = small_config(8, 2, 128);
  c.intermediate_size = 1408;
  auto m = fp8_model(c, 22);
  const int64_t V = m->info().vocab;
  const auto all = decode_rows(*m, 0, 24), lo = decode_rows(*m, 0, 16), hi = decode_rows(*m, 16, 8);
  for (size_t s = 0; s < all.size(); s++) {
    double worst = 0, scale = 0;
    for (int64_t b = 0; b < 24; b++)
      for (int64_t v = 0; v < V; v++) {
        const float ref = b < 16 ? lo[s][size_t(b * V + v)] : hi[s][size_t((b - 16) * V + v)];
        worst = std::max(worst, double(std::fabs(all[s][size_t(b * V + v)] - ref)));
        scale = std::max(scale, double(std::fabs(ref)));
      }
    std::printf("step %zu: max |24-row - 16/8-row| %.3g of max |logit| %.3g\n", s, worst, scale);
    EXPECT_LE(worst, 2e-2 * scale) << "decode step " << s;
  }
}

// --fp8-lm-head on the GPU: the head's FP8 product after decode_stack (batch 1: the final add + norm, then the ring
// on bf16 x) and in the per-op step (batch 4: the ring with the final add + norm in its f16 staging), against the
// same FP8 model whose 16-bit head holds the dequantised codes. Those are rounded to bf16 (2^-9 of each weight) and
// its x is bf16 where the staged x is f16, so the two agree to ~1e-3 of the logits; a scale or row misplaced in the
// FP8 head would be off by the logits' size.
TEST(DecodeStack, Fp8LmHeadMatchesTheDequantisedHead) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c = small_config(8, 2, 128);
  c.intermediate_size = 1408;
  auto h = fp8_model(c, 23, /*fp8_head=*/true), d = fp8_model(c, 23);
  ASSERT_TRUE(h->lm_head().is_fp8());
  ASSERT_FALSE(d->lm_head().is_fp8());
  dequantize_fp8(h->lm_head().w, h->lm_head().w_scale, d->param("lm_head.weight").weight);
  const int64_t V = c.vocab_size;
  for (int64_t B : {1, 4}) {
    const auto got = decode_rows(*h, 0, B), ref = decode_rows(*d, 0, B);
    for (size_t s = 0; s < got.size(); s++) {
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < B * V; i++) {
        worst = std::max(worst, double(std::fabs(got[s][size_t(i)] - ref[s][size_t(i)])));
        scale = std::max(scale, double(std::fabs(ref[s][size_t(i)])));
      }
      std::printf("batch %lld step %zu: max |FP8 head - dequantised head| %.3g of max |logit| %.3g\n", (long long)B,
                  s, worst, scale);
      EXPECT_LE(worst, 1e-2 * scale) << "batch " << B << ", decode step " << s;
    }
  }
  // ANVIL_SKINNY_TILES=1 at batch 1: the head (the only product decode_stack leaves to the skinny GEMM) gets its
  // pre-tiled copy, and the logits stay identical. This head (512 x 512, under the ring's one-row minimum of 20 MB)
  // takes the register kernel, which ignores the copy; the ring reading it at one row is checked by the skinny_gemm
  // op cases, which run every ring shape both ways.
  const auto plain = decode_rows(*h, 0, 1);
  setenv("ANVIL_SKINNY_TILES", "1", 1);
  const auto tiled = decode_rows(*h, 0, 1);
  unsetenv("ANVIL_SKINNY_TILES");
  EXPECT_EQ(h->lm_head().tiles.defined(), backend(Device::gpu(0)).info().bulk_copy);
  for (size_t s = 0; s < plain.size(); s++) EXPECT_EQ(plain[s], tiled[s]) << "pre-tiled head, decode step " << s;
}

}  // namespace
}  // namespace anvil
