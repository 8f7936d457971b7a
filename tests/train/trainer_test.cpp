#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "fake_bigram.h"
#include "test_data.h"
#include "train/checkpoint.h"
#include "train/fs_util.h"
#include "train/trainer.h"

using namespace anvil;
using anvil::train_test::FakeBigram;
namespace fs = std::filesystem;

namespace {

TrainConfig recipe(const std::string& data, const std::string& out, int64_t steps) {
  TrainConfig c;
  c.source = "test";
  c.model.arch = "llama";
  c.data.dir = data;
  c.data.seq_len = 16;
  c.data.batch = 4;
  c.data.micro_batches = 2;
  c.optim.lr = 0.05;
  c.optim.warmup_steps = 2;
  c.optim.grad_clip = 0.5;  // clipping active on most steps of a fresh bigram
  c.steps = steps;
  c.eval_every = 4;
  c.eval_batches = 2;
  c.log_every = 5;
  c.save_every = 3;
  c.keep_checkpoints = 2;
  c.out_dir = out;
  c.seed = 17;
  return c;
}

struct TrainRun {
  std::vector<double> losses;
  TrainResult result;
};

TrainRun train(const TrainConfig& c, DType dtype, const std::string& resume = "", int64_t stop_at = -1) {
  FakeBigram model(train_test::kLetterVocab, dtype, 99);
  Trainer t(c, model);
  t.verbose = false;
  if (!resume.empty()) t.resume(resume);
  TrainRun r;
  t.on_step = [&](int64_t step, double loss) {
    r.losses.push_back(loss);
    if (step == stop_at) Trainer::request_stop();
  };
  r.result = t.run();
  Trainer::clear_stop();
  return r;
}

std::vector<nlohmann::json> metrics_rows(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(out + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace

TEST(Trainer, LossFallsAndMetricsPlotAndCheckpointsAreWritten) {
  train_test::Scratch root_scratch("trainer_basic");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 40);
  c.optim.lr = 0.1;
  TrainRun r = train(c, DType::f32);
  ASSERT_EQ(r.losses.size(), 40u);
  EXPECT_LT(r.losses.back(), r.losses.front() - 0.5) << "first " << r.losses.front() << " last " << r.losses.back();
  EXPECT_EQ(r.result.step, 40);
  EXPECT_FALSE(r.result.interrupted);
  EXPECT_GT(r.result.val_loss, 0);
  auto rows = metrics_rows(c.out_dir);
  ASSERT_EQ(rows.size(), 40u);
  for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens_per_s"}) EXPECT_TRUE(rows[0].contains(k)) << k;
  EXPECT_FALSE(rows[0].contains("val_loss"));
  EXPECT_TRUE(rows[3].contains("val_loss"));   // step 4
  EXPECT_TRUE(rows[39].contains("val_loss"));  // the end
  EXPECT_DOUBLE_EQ(rows[0]["lr"].get<double>(), 0.05);  // warmup: (0 + 1) / 2 of 0.1
  EXPECT_TRUE(fs::exists(c.out_dir + "/loss.svg"));
  auto cks = list_checkpoints(c.out_dir);
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks.back().first, 40);
  EXPECT_EQ(latest_checkpoint(c.out_dir), c.out_dir + "/checkpoint-40");
  for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(c.out_dir + "/checkpoint-40/" + f)) << f;
  auto st = nlohmann::json::parse(read_file_bytes(c.out_dir + "/checkpoint-40/trainer_state.json"));
  EXPECT_EQ(st["step"].get<int64_t>(), 40);
  EXPECT_EQ(st["config"]["optim"]["lr"].get<double>(), 0.1);
}

// 10 steps straight == 5 steps, resume, 5 more: bit-identical losses, for f32 and bf16 compute copies. The first
// part runs on to step 7 before the resume from step 5, so the metrics log must drop its rows 6 and 7.
TEST(Trainer, ResumeContinuesExactly) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    train_test::Scratch root_scratch(std::string("trainer_resume_") + dtype_name(dt));
    const std::string& root = root_scratch.path;
    std::string data = train_test::make_dataset(root, 20);  // small: the 10 steps cross an epoch boundary
    TrainConfig straight = recipe(data, root + "/a", 10);
    straight.save_every = 5;
    TrainRun a = train(straight, dt);
    TrainConfig first = recipe(data, root + "/b", 10);
    first.save_every = 5;
    TrainRun b1 = train(first, dt, "", /*stop_at=*/7);
    EXPECT_TRUE(b1.result.interrupted);
    EXPECT_EQ(b1.result.step, 7);
    EXPECT_EQ(latest_checkpoint(first.out_dir), first.out_dir + "/checkpoint-7");
    TrainRun b2 = train(first, dt, first.out_dir + "/checkpoint-5");
    ASSERT_EQ(a.losses.size(), 10u);
    ASSERT_EQ(b1.losses.size(), 7u);
    ASSERT_EQ(b2.losses.size(), 5u);
    for (size_t i = 0; i < 10; i++) EXPECT_EQ(i < 5 ? b1.losses[i] : b2.losses[i - 5], a.losses[i]) << "step " << i + 1;
    EXPECT_EQ(b1.losses[5], b2.losses[0]);
    EXPECT_EQ(b2.result.val_loss, a.result.val_loss);
    auto rows = metrics_rows(first.out_dir);
    ASSERT_EQ(rows.size(), 10u);
    for (size_t i = 0; i < 10; i++) EXPECT_EQ(rows[i]["step"].get<int64_t>(), int64_t(i + 1));
  }
}

// grad_weight = 1 / micro_batches: batch 8 in one micro-batch and batch 4 in two see the same windows (the loader
// hands out consecutive windows of one order) and must make the same update.
TEST(Trainer, MicroBatchesAccumulateLikeOneBigBatch) {
  train_test::Scratch root_scratch("trainer_micro");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig one = recipe(data, root + "/one", 4);
  one.data.batch = 8;
  one.data.micro_batches = 1;
  TrainConfig two = recipe(data, root + "/two", 4);
  two.data.batch = 4;
  two.data.micro_batches = 2;
  TrainRun a = train(one, DType::f32), b = train(two, DType::f32);
  for (size_t i = 0; i < 4; i++) EXPECT_NEAR(a.losses[i], b.losses[i], 1e-5) << "step " << i + 1;
}

TEST(Trainer, ProgressLineFormat) {
  train_test::Scratch root_scratch("trainer_log");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 10);
  FakeBigram model(train_test::kLetterVocab, DType::f32, 99);
  Trainer t(c, model);
  ::testing::internal::CaptureStdout();
  t.run();
  std::string out = ::testing::internal::GetCapturedStdout();
  std::regex line(R"(step 5/10 \| loss [0-9.]+ \| lr [0-9.]+e-[0-9]+ \| [0-9.]+[kMG]? tok/s \| ETA [0-9]+s\n)");
  EXPECT_TRUE(std::regex_search(out, line)) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(step 8/10 .*\| val [0-9.]+\n)"))) << out;
  EXPECT_NE(out.find("done: 10 steps"), std::string::npos) << out;
}

TEST(Trainer, ResumeRefusesAnotherDataOrder) {
  train_test::Scratch root_scratch("trainer_resume_bad");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 3);
  train(c, DType::f32);
  TrainConfig other = c;
  other.data.seq_len = 8;
  FakeBigram model(train_test::kLetterVocab, DType::f32, 99);
  Trainer t(other, model);
  try {
    t.resume(c.out_dir + "/checkpoint-3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len"), std::string::npos) << e.what();
  }
}

TEST(Trainer, SigintStopsAfterTheStepWithACheckpoint) {
  train_test::Scratch root_scratch("trainer_sigint");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 50);
  c.save_every = 0;
  FakeBigram model(train_test::kLetterVocab, DType::f32, 99);
  Trainer t(c, model);
  t.verbose = false;
  Trainer::install_sigint_handler();
  t.on_step = [](int64_t step, double) {
    if (step == 7) std::raise(SIGINT);
  };
  TrainResult r = t.run();
  std::signal(SIGINT, SIG_DFL);
  Trainer::clear_stop();
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(latest_checkpoint(c.out_dir), c.out_dir + "/checkpoint-7");
}

TEST(Trainer, NonFiniteLossStopsNamingStepAndParameter) {
  train_test::Scratch root_scratch("trainer_nan");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 20);
  FakeBigram model(train_test::kLetterVocab, DType::f32, 99);
  model.nan_at_call = 2 * 7 + 1;  // the first micro-batch of step 8 (2 per step)
  Trainer t(c, model);
  t.verbose = false;
  try {
    t.run();
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("step 8"), std::string::npos) << m;
    EXPECT_NE(m.find("bigram.bias"), std::string::npos) << m;
    EXPECT_NE(m.find("checkpoint-6"), std::string::npos) << m;
  }
  EXPECT_EQ(latest_checkpoint(c.out_dir), c.out_dir + "/checkpoint-6");
}

TEST(Trainer, CheckpointWriteFailureIsAnErrorAndKeepsThePreviousOne) {
  train_test::Scratch root_scratch("trainer_diskfull");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 10);
  FakeBigram model(train_test::kLetterVocab, DType::f32, 99);
  Trainer t(c, model);
  t.verbose = false;
  t.on_step = [&](int64_t step, double) { model.fail_save = step >= 4; };
  try {
    t.run();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint-6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ENOSPC"), std::string::npos) << e.what();
  }
  EXPECT_EQ(latest_checkpoint(c.out_dir), c.out_dir + "/checkpoint-3");
  EXPECT_TRUE(fs::exists(c.out_dir + "/checkpoint-3/model.safetensors"));
  EXPECT_EQ(list_checkpoints(c.out_dir).size(), 1u);
}

TEST(Trainer, DatasetFromAnotherTokenizerIsRefused) {
  train_test::Scratch root_scratch("trainer_vocab");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root);
  TrainConfig c = recipe(data, root + "/run", 3);
  FakeBigram small(10, DType::f32, 1);
  EXPECT_THROW(Trainer(c, small), Error);
}
