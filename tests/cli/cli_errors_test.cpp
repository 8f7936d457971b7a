// The anvil binary on bad command lines: a non-zero exit and a message that names the problem. The binary's
// path comes from ANVIL_BIN (set by ctest); without it these tests are skipped.
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

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = anvil::test::anvil_bin_missing(); !why.empty()) GTEST_SKIP() << why;
  }
};


}  // namespace

TEST_F(Cli, UnknownOptionExitsWith2AndNamesIt) {
  for (const char* cmd : {"generate --model x --prompt hi", "chat --model x", "bench decode --model x"}) {
    Output r = run_anvil(std::string(cmd) + " --no-such-option");
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_TRUE(has(r, "--no-such-option")) << r.out;
  }
}

TEST_F(Cli, BadValuesAndMissingOptionsExitWith2) {
  Output r = run_anvil("generate --model x --prompt hi --temperature warm");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--temperature")) << r.out;
  r = run_anvil("generate --model x --prompt hi --top-p 7");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--top-p")) << r.out;
  r = run_anvil("generate --prompt hi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--model")) << r.out;
  r = run_anvil("generate --model x --prompt hi --dtype f64");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--dtype")) << r.out;
  r = run_anvil("bench");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run_anvil("bench decode --model x --batch 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--batch")) << r.out;
  r = run_anvil("no-such-command");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST_F(Cli, HelpShowsDefaultsAndExitsWith0) {
  Output r = run_anvil("generate --help");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* s : {"--max-tokens", "128", "--temperature", "0.8", "--top-k", "40", "--top-p", "0.95",
                        "--seed", "--greedy", "--stop", "--no-stream", "--chat", "--device", "--dtype"})
    EXPECT_TRUE(has(r, s)) << s << " missing from:\n" << r.out;
  r = run_anvil("chat --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "/reset")) << r.out;
  r = run_anvil("bench decode --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "--bandwidth-tbs")) << r.out;
}

TEST_F(Cli, MissingModelDirectoryOrTokenizerIsAClearError) {
  const std::string missing = "/nonexistent/anvil-model-dir";
  for (const std::string cmd : {"generate --prompt hi --model ", "chat --model ", "bench decode --model "}) {
    Output r = run_anvil(cmd + missing);
    EXPECT_NE(r.code, 0) << cmd << ": " << r.out;
    EXPECT_TRUE(has(r, missing)) << r.out;
    EXPECT_TRUE(has(r, "does not exist")) << r.out;
  }
  // A directory without tokenizer.json.
  const auto dir = std::filesystem::temp_directory_path() / "anvil_cli_no_tokenizer";
  std::filesystem::create_directories(dir);
  Output r = run_anvil("generate --prompt hi --model " + dir.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "tokenizer.json")) << r.out;
  r = run_anvil("chat --model " + dir.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "tokenizer.json")) << r.out;
  std::filesystem::remove_all(dir);
}

// ANVIL_DECODE_FUSION is read once per process, so its values are checked here, one process each: the values it
// takes decode the tiny model on the CPU (where nothing fuses), any other is an error naming the variable.
TEST_F(Cli, DecodeFusionKnobTakesItsValuesAndRejectsOthers) {
  const std::string bench = "bench decode --model tests/fixtures/llama_tiny --device cpu --tokens 2 --bandwidth-tbs 1";
  for (const char* v : {"0", "1", "stage"}) {
    Output r = run_anvil(bench, std::string("ANVIL_DECODE_FUSION=") + v + " ");
    EXPECT_EQ(r.code, 0) << v << ": " << r.out;
    EXPECT_TRUE(has(r, "ms/step")) << v << ": " << r.out;
  }
  Output r = run_anvil(bench, "ANVIL_DECODE_FUSION=yes ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r, "ANVIL_DECODE_FUSION unset, 0, 1 or stage, got yes")) << r.out;
}
