// `anvil bench train` end to end on the CPU with tiny models: it runs full training steps, prints the table and
// the RESULT line, judges the targets, and refuses bad options. The binary comes from ANVIL_BIN (set by ctest;
// the working directory is the source tree, so configs/models and tests/fixtures resolve).
#include <gtest/gtest.h>

#include "run_anvil.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

using anvil::test::CmdOutput;
using anvil::test::has;
using Output = CmdOutput;

using anvil::test::run_anvil;


class BenchTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = anvil::test::anvil_bin_missing(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(BenchTrain, LlamaTinyOnCpu) {
  // A target of 1 tok/s is met by any machine; 1e12 by none. The memory target: 100 GB of RSS is never reached.
  Output r = run_anvil("bench train --model configs/models/llama-tiny.json --batch 2 --seq 64 --steps 2 --warmup 1 "
                   "--device cpu --target-tok-s 1 --target-mem-gb 100");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"tokens/s (median)", "ms/step", "MFU", "- (GPU only)", "peak memory (RSS)",
                        "activations kept", "RESULT model=configs/models/llama-tiny.json batch=2 seq=64 dtype=f32",
                        "tok_target=MET mem_target=MET"})
    EXPECT_TRUE(has(r, s)) << s << " missing in:\n" << r.out;
  r = run_anvil("bench train --model llama-tiny --batch 1 --seq 32 --steps 1 --warmup 0 --device cpu "
            "--target-tok-s 1e12");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "tok_target=MISSED mem_target=-")) << r.out;
}

TEST_F(BenchTrain, MambaTinyWithRecompute) {
  Output r = run_anvil("bench train --model tests/fixtures/mamba_tiny/config.json --batch 2 --seq 40 --steps 2 "
                   "--warmup 1 --device cpu --recompute");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "recompute on")) << r.out;
  EXPECT_TRUE(has(r, "RESULT model=tests/fixtures/mamba_tiny/config.json batch=2 seq=40 dtype=f32 recompute=1"))
      << r.out;
}

// --keep-layers: the shape line and RESULT say how many layers keep everything (at most all of them); a negative
// value is refused before anything runs.
TEST_F(BenchTrain, KeepLayersWithRecompute) {
  Output r = run_anvil("bench train --model llama-tiny --batch 1 --seq 32 --steps 1 --warmup 0 --device cpu "
                       "--recompute --keep-layers 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "recompute on (keeps the last 2 of 4 layers)")) << r.out;
  EXPECT_TRUE(has(r, "dtype=f32 recompute=1 keep_layers=2 tok_s=")) << r.out;
  r = run_anvil("bench train --model tests/fixtures/mamba_tiny/config.json --batch 1 --seq 16 --steps 1 "
                "--warmup 0 --device cpu --recompute --keep-layers 9");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "recompute on (keeps the last 2 of 2 layers)")) << r.out;
  EXPECT_TRUE(has(r, "recompute=1 keep_layers=2 ")) << r.out;
  r = run_anvil("bench train --model llama-tiny --batch 1 --seq 32 --steps 1 --warmup 0 --device cpu --recompute "
                "--keep-layers=-1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--keep-layers: expected a layer count >= 0 (0 means 1), got -1")) << r.out;
  EXPECT_FALSE(has(r, "RESULT")) << r.out;
}

TEST_F(BenchTrain, BadOptionsExitWith2Or1) {
  Output r = run_anvil("bench train --batch 2");  // no --model
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--model")) << r.out;
  r = run_anvil("bench train --model llama-tiny --seq 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--seq")) << r.out;
  r = run_anvil("bench train --model no-such-preset --device cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r, "no-such-preset")) << r.out;
  r = run_anvil("bench train --model llama-tiny --seq 4096 --device cpu");  // past max_position_embeddings (512)
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r, "512")) << r.out;
}

}  // namespace
