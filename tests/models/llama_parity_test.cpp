// LlamaModel against transformers' LlamaForCausalLM (tests/fixtures/llama_tiny and llama_tiny_tied, made by
// tools/make_llama_fixture.py): logits, loss, every gradient, greedy decoding, save/load.
#include <gtest/gtest.h>
#include <unistd.h>

#include "models/llama/llama.h"
#include "parity_util.h"

namespace anvil {
namespace {

std::unique_ptr<CausalLM> load_llama(const std::string& dir, bool trainable) {
  return LlamaModel::load(dir, Device::cpu(), DType::f32, trainable);
}

TEST(LlamaParity, TinyF32Cpu) { parity::run_parity("llama_tiny", load_llama); }
TEST(LlamaParity, TinyTiedF32Cpu) { parity::run_parity("llama_tiny_tied", load_llama); }

TEST(LlamaParity, LoadModelPicksLlama) {
  auto m = load_model(parity::fixture("llama_tiny"), Device::cpu(), DType::f32, false);
  EXPECT_EQ(m->info().arch, "llama");
}

}  // namespace
}  // namespace anvil
