// MambaModel against transformers' MambaForCausalLM (tests/fixtures/mamba_tiny, made by
// tools/make_mamba_fixture.py): logits, loss, every gradient, greedy decoding, save/load.
#include <gtest/gtest.h>
#include <unistd.h>

#include "models/mamba/mamba.h"
#include "parity_util.h"

namespace anvil {
namespace {

TEST(MambaParity, TinyF32Cpu) {
  parity::run_parity("mamba_tiny", [](const std::string& dir, bool trainable) -> std::unique_ptr<CausalLM> {
    return MambaModel::load(dir, Device::cpu(), DType::f32, trainable);
  });
}

TEST(MambaParity, LoadModelPicksMamba) {
  auto m = load_model(parity::fixture("mamba_tiny"), Device::cpu(), DType::f32, false);
  EXPECT_EQ(m->info().arch, "mamba");
  EXPECT_EQ(m->info().layers, 2);
}

}  // namespace
}  // namespace anvil
