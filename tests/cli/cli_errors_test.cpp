// The anvil binary on bad command lines: a non-zero exit and a message that names the problem. The binary's
// path comes from ANVIL_BIN (set by ctest); without it these tests are skipped.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

struct Output {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `anvil <args>` through the shell with stdin from /dev/null.
Output anvil(const std::string& args) {
  Output r;
  const char* bin = std::getenv("ANVIL_BIN");
  std::string cmd = std::string("'") + bin + "' " + args + " </dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("ANVIL_BIN");
    if (!bin || !*bin) GTEST_SKIP() << "ANVIL_BIN is not set";
    if (!std::filesystem::exists(bin)) GTEST_SKIP() << "ANVIL_BIN=" << bin << " does not exist (not built)";
  }
};

bool has(const Output& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

}  // namespace

TEST_F(Cli, UnknownOptionExitsWith2AndNamesIt) {
  for (const char* cmd : {"generate --model x --prompt hi", "chat --model x", "bench decode --model x"}) {
    Output r = anvil(std::string(cmd) + " --no-such-option");
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_TRUE(has(r, "--no-such-option")) << r.out;
  }
}

TEST_F(Cli, BadValuesAndMissingOptionsExitWith2) {
  Output r = anvil("generate --model x --prompt hi --temperature warm");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--temperature")) << r.out;
  r = anvil("generate --model x --prompt hi --top-p 7");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--top-p")) << r.out;
  r = anvil("generate --prompt hi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--model")) << r.out;
  r = anvil("generate --model x --prompt hi --dtype f64");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--dtype")) << r.out;
  r = anvil("bench");
  EXPECT_EQ(r.code, 2) << r.out;
  r = anvil("bench decode --model x --batch 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--batch")) << r.out;
  r = anvil("no-such-command");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST_F(Cli, HelpShowsDefaultsAndExitsWith0) {
  Output r = anvil("generate --help");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* s : {"--max-tokens", "128", "--temperature", "0.8", "--top-k", "40", "--top-p", "0.95",
                        "--seed", "--greedy", "--stop", "--no-stream", "--chat", "--device", "--dtype"})
    EXPECT_TRUE(has(r, s)) << s << " missing from:\n" << r.out;
  r = anvil("chat --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "/reset")) << r.out;
  r = anvil("bench decode --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "--bandwidth-tbs")) << r.out;
}

TEST_F(Cli, MissingModelDirectoryOrTokenizerIsAClearError) {
  const std::string missing = "/nonexistent/anvil-model-dir";
  for (const std::string cmd : {"generate --prompt hi --model ", "chat --model ", "bench decode --model "}) {
    Output r = anvil(cmd + missing);
    EXPECT_NE(r.code, 0) << cmd << ": " << r.out;
    EXPECT_TRUE(has(r, missing)) << r.out;
    EXPECT_TRUE(has(r, "does not exist")) << r.out;
  }
  // A directory without tokenizer.json.
  const auto dir = std::filesystem::temp_directory_path() / "anvil_cli_no_tokenizer";
  std::filesystem::create_directories(dir);
  Output r = anvil("generate --prompt hi --model " + dir.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "tokenizer.json")) << r.out;
  r = anvil("chat --model " + dir.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "tokenizer.json")) << r.out;
  std::filesystem::remove_all(dir);
}
