// MambaModel against transformers' MambaForCausalLM (tests/fixtures/mamba_tiny, made by
// tools/make_mamba_fixture.py): logits, loss, every gradient, greedy decoding, save/load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "models/mamba/mamba.h"
#include "parity_util.h"

namespace anvil {
namespace {

TEST(MambaParity, TinyF32Cpu) {
  parity::run_parity("mamba_tiny", [](const std::string& dir, bool trainable) -> std::unique_ptr<CausalLM> {
    return MambaModel::load(dir, Device::cpu(), DType::f32, trainable);
  });
}

// The 130m shape (24 layers, width 768, vocabulary 50280), made on the fly — it is 1 GB with its gradients:
//   python3 tools/make_mamba_fixture.py --out /tmp/mamba130m --preset 130m --dtype f32 --grads sample
//   ANVIL_MAMBA130M_FIXTURE=/tmp/mamba130m build/tests/anvil_tests --gtest_filter='MambaParity.*'
TEST(MambaParity, Shape130mF32Cpu) {
  const char* dir = std::getenv("ANVIL_MAMBA130M_FIXTURE");
  if (!dir || !*dir) GTEST_SKIP() << "ANVIL_MAMBA130M_FIXTURE is not set (see the comment above this test)";
  parity::run_parity(
      dir,
      [](const std::string& d, bool trainable) -> std::unique_ptr<CausalLM> {
        return MambaModel::load(d, Device::cpu(), DType::f32, trainable);
      },
      /*all_grads=*/false, parity::LogitTol{1e-4, 6e-4, 2e-3});
}

TEST(MambaParity, LoadModelPicksMamba) {
  auto m = load_model(parity::fixture("mamba_tiny"), Device::cpu(), DType::f32, false);
  EXPECT_EQ(m->info().arch, "mamba");
  EXPECT_EQ(m->info().layers, 2);
}

}  // namespace
}  // namespace anvil
