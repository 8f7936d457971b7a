// Golden loss curve: `anvil train` on the committed init and batches (tests/fixtures/parity, made by
// tools/train_parity.py) must follow PyTorch's curve for the same run within 1% at every step (f32, CPU).
// CI runs the first 20 steps of the 200-step recipe: those are all warmup (warmup_steps = 20), whose learning
// rate peak * (s + 1) / warmup does not depend on the total, so `--set steps=20` sees exactly the learning rates
// of the first 20 steps of the committed 200-step PyTorch curve. The binary comes from ANVIL_BIN (set by ctest).
#include <gtest/gtest.h>

#include "../cli/run_anvil.h"
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kSteps = 20;
constexpr double kTol = 0.01;  // the bound for f32

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `anvil train` from the source directory; returns the exit code and fills `out` with stdout + stderr.
// One OpenMP thread: at this size (256 tokens a step) threads cost more than they give, and on a busy 2-core CI
// machine 20 Llama steps took 31 s with two threads against 3.3 s with one.
int anvil_train(const std::string& args, std::string& out) {
  const anvil::test::CmdOutput r =
      anvil::test::run_anvil("train " + args, std::string("cd '") + ANVIL_SOURCE_DIR + "' && OMP_NUM_THREADS=1 ");
  out += r.out;
  return r.code;
}

std::string train_args(const std::string& arch, const fs::path& run) {
  return "tests/fixtures/parity/" + arch + ".toml --set steps=" + std::to_string(kSteps) + " --set out_dir='" +
         run.string() + "'";
}

void check_parity(const std::string& arch) {
  if (const std::string why = anvil::test::anvil_bin_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path fixtures = fs::path(ANVIL_SOURCE_DIR) / "tests/fixtures/parity";
  const fs::path ref = fixtures / (arch + "_torch_f32.json");
  ASSERT_TRUE(fs::exists(ref)) << ref << " is missing (tools/train_parity.py torch --arch " << arch << ")";
  const json torch = json::parse(slurp(ref));
  const std::vector<double> want = torch.at("loss").get<std::vector<double>>();
  ASSERT_GE(want.size(), size_t(kSteps));
  ASSERT_TRUE(torch.at("set").empty()) << "the reference must be the recipe's own run";

  const fs::path run = fs::temp_directory_path() / ("anvil-parity-" + arch + "-" + std::to_string(::getpid()));
  fs::remove_all(run);
  std::string log;
  const int code = anvil_train(train_args(arch, run), log);
  ASSERT_EQ(code, 0) << log;

  std::vector<double> got;
  std::istringstream rows(slurp(run / "metrics.jsonl"));
  for (std::string line; std::getline(rows, line);) {
    if (line.empty()) continue;
    json row = json::parse(line);
    if (row.contains("loss")) got.push_back(row["loss"].get<double>());
  }
  ASSERT_EQ(got.size(), size_t(kSteps)) << log;
  double worst = 0;
  for (int s = 0; s < kSteps; s++) {
    const double rel = std::fabs(got[size_t(s)] - want[size_t(s)]) / std::fabs(want[size_t(s)]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, kTol) << arch << " step " << s + 1 << ": anvil " << got[size_t(s)] << ", torch "
                         << want[size_t(s)];
  }
  std::printf("%s: %d steps, max relative difference to PyTorch %.4f%%\n", arch.c_str(), kSteps, 100 * worst);
  fs::remove_all(run);
}

}  // namespace

TEST(LossParity, LlamaF32FollowsPyTorchCurve) { check_parity("llama"); }
TEST(LossParity, MambaF32FollowsPyTorchCurve) { check_parity("mamba"); }
