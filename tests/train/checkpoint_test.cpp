#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_data.h"
#include "train/checkpoint.h"
#include "train/fs_util.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

auto writer(const std::string& text) {
  return [text](const std::string& dir) {
    write_file_atomic(dir + "/a.txt", text);
    fs::create_directories(dir + "/sub");
    write_file_atomic(dir + "/sub/b.txt", text);
  };
}

size_t hidden_entries(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string()[0] == '.';
  return n;
}

}  // namespace

TEST(Checkpoint, AtomicLatestAndKeepLastK) {
  train_test::Scratch out_scratch("ckpt");
  const std::string& out = out_scratch.path;
  for (int64_t step : {10, 20, 30, 40}) save_checkpoint(out, step, 2, writer("s" + std::to_string(step)));
  auto all = list_checkpoints(out);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 30);
  EXPECT_EQ(all[1].first, 40);
  EXPECT_EQ(latest_checkpoint(out), out + "/checkpoint-40");
  EXPECT_EQ(read_file_bytes(out + "/checkpoint-40/sub/b.txt"), "s40");
  EXPECT_EQ(resolve_resume("auto", out), out + "/checkpoint-40");
  EXPECT_EQ(resolve_resume(out, out), out + "/checkpoint-40") << "an out_dir resolves through `latest`";
  EXPECT_EQ(resolve_resume("auto", out + "/none"), "");
  EXPECT_EQ(hidden_entries(out), 0u);
  // Saving the same step again replaces it whole.
  save_checkpoint(out, 40, 2, writer("again"));
  EXPECT_EQ(read_file_bytes(out + "/checkpoint-40/a.txt"), "again");
  EXPECT_EQ(hidden_entries(out), 0u);
}

TEST(Checkpoint, FailedWriteLeavesPreviousCheckpointUntouched) {
  train_test::Scratch out_scratch("ckpt_fail");
  const std::string& out = out_scratch.path;
  save_checkpoint(out, 5, 3, writer("good"));
  // A failure in the middle of writing (what a full disk looks like to the writer).
  try {
    save_checkpoint(out, 6, 3, [](const std::string& dir) {
      write_file_atomic(dir + "/a.txt", "partial");
      ANVIL_THROW("write", "free space", "ENOSPC");
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint-6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ENOSPC"), std::string::npos) << e.what();
  }
  // A failing rename: the destination exists as a file.
  std::ofstream(out + "/checkpoint-7") << "in the way";
  EXPECT_THROW(save_checkpoint(out, 7, 3, writer("x")), Error);
  EXPECT_EQ(latest_checkpoint(out), out + "/checkpoint-5");
  EXPECT_EQ(read_file_bytes(out + "/checkpoint-5/a.txt"), "good");
  EXPECT_FALSE(fs::exists(out + "/checkpoint-6"));
  EXPECT_EQ(hidden_entries(out), 0u) << "no temporary directory is left behind";
  EXPECT_EQ(list_checkpoints(out).size(), 1u);
}

TEST(Checkpoint, ResumeArgumentsAreChecked) {
  train_test::Scratch out_scratch("ckpt_resume");
  const std::string& out = out_scratch.path;
  EXPECT_THROW(resolve_resume(out + "/missing", out), Error);
  EXPECT_THROW(resolve_resume(out, out), Error);  // a directory that is no checkpoint
  std::ofstream(out + "/latest") << "checkpoint-3\n";
  EXPECT_THROW(latest_checkpoint(out), Error);  // names a directory that does not exist
}
