#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_data.h"
#include "train/dataset.h"
#include "train/documents.h"
#include "train/prepare.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> docs_of(const std::string& path, const DocumentOptions& o) {
  std::vector<std::string> d;
  for_each_document(path, o, [&](std::string&& s, uint64_t) { d.push_back(s); });
  return d;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<int32_t> all_tokens(const std::string& dir, const std::string& split) {
  TokenStream s(dir, split);
  std::vector<int32_t> t(size_t(s.size()));
  s.read(0, s.size(), t.data());
  return t;
}

}  // namespace

TEST(Documents, SplitModes) {
  train_test::Scratch dir_scratch("docs");
  const std::string& dir = dir_scratch.path;
  write(dir + "/f.txt", "one\ntwo\n%\nthree\n\nfour\n%\n%\n  \n%\nfive\n");
  DocumentOptions o;
  o.separator = "%";
  EXPECT_EQ(docs_of(dir + "/f.txt", o), (std::vector<std::string>{"one\ntwo", "three\n\nfour", "five"}));
  o.separator.clear();
  o.split = "paragraph";
  EXPECT_EQ(docs_of(dir + "/f.txt", o), (std::vector<std::string>{"one\ntwo\n%\nthree", "four\n%\n%", "%\nfive"}));
  o.split = "file";
  EXPECT_EQ(docs_of(dir + "/f.txt", o).size(), 1u);

  write(dir + "/d.jsonl", "{\"text\": \"a\\nb\"}\n\n{\"text\": \"c\", \"id\": 2}\n");
  DocumentOptions j;
  EXPECT_EQ(docs_of(dir + "/d.jsonl", j), (std::vector<std::string>{"a\nb", "c"}));
  j.jsonl_field = "body";
  EXPECT_THROW(docs_of(dir + "/d.jsonl", j), Error);
  write(dir + "/bad.jsonl", "{\"text\": \"a\"}\n{oops\n");
  try {
    docs_of(dir + "/bad.jsonl", DocumentOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Documents, BinaryFilesAreSkippedAndBadUtf8IsAnError) {
  train_test::Scratch dir_scratch("docs_bin");
  const std::string& dir = dir_scratch.path;
  write(dir + "/x.dat", std::string("ab\0cd", 5));
  DocumentOptions o;
  EXPECT_FALSE(for_each_document(dir + "/x.dat", o, [](std::string&&, uint64_t) { FAIL(); }));
  write(dir + "/latin1.txt", "ok\n\ncaf\xe9\n");
  o.split = "paragraph";
  try {
    docs_of(dir + "/latin1.txt", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("latin1.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(utf8_error_offset("h\xc3\xa9llo \xf0\x9f\x98\x80"), -1);
  EXPECT_EQ(utf8_error_offset("ab\xc0\xaf"), 2);          // overlong
  EXPECT_EQ(utf8_error_offset("a\xed\xa0\x80"), 1);       // surrogate
  EXPECT_EQ(utf8_error_offset("abc\xe2\x82"), 3);         // cut short
}

TEST(Prepare, ShardsHoldEveryDocumentEosSeparatedAndSplitBySeed) {
  train_test::Scratch root_scratch("prepare");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root, 300, 0.2, 1000);
  DatasetMeta m = read_dataset_meta(data);
  EXPECT_EQ(m.vocab_size, uint32_t(train_test::kLetterVocab));
  EXPECT_EQ(m.eos_id, train_test::kLetterEos);
  const SplitMeta& tr = m.splits.at("train");
  const SplitMeta& va = m.splits.at("val");
  EXPECT_EQ(tr.docs + va.docs, 300);
  EXPECT_GT(va.docs, 30);  // ~20% of 300
  EXPECT_LT(va.docs, 90);
  EXPECT_GT(tr.shards.size(), 2u) << "1000-token shards";
  auto t = all_tokens(data, "train");
  EXPECT_EQ(int64_t(t.size()), tr.tokens);
  EXPECT_EQ(t.back(), train_test::kLetterEos);
  EXPECT_EQ(std::count(t.begin(), t.end(), train_test::kLetterEos), tr.docs);
  // Same inputs and seed → identical shards; a new seed → a different split.
  std::string again = train_test::make_dataset(root + "/again", 300, 0.2, 1000);
  EXPECT_EQ(all_tokens(again, "train"), t);
  PrepareOptions o;
  o.inputs = {root + "/corpus.txt"};
  o.out_dir = root + "/seed9";
  o.val_fraction = 0.2;
  o.docs.separator = "%";
  o.seed = 9;
  o.progress = false;
  prepare_dataset(o, train_test::letter_tokenizer());
  EXPECT_NE(all_tokens(o.out_dir, "train"), t);
}

TEST(Prepare, DirectoriesDuplicatesAndRerunsAreHandled) {
  train_test::Scratch root_scratch("prepare_dirs");
  const std::string& root = root_scratch.path;
  fs::create_directories(root + "/in/sub");
  write(root + "/in/a.txt", "abc\n");
  write(root + "/in/sub/b.txt", "de\n");
  write(root + "/in/a.dat", std::string("\0\1", 2));
  fs::create_symlink(root + "/in/a.txt", root + "/in/a.u8");
  PrepareOptions o;
  o.inputs = {root + "/in", root + "/in/a.txt"};
  o.out_dir = root + "/out";
  o.val_fraction = 0;
  o.progress = false;
  PrepareStats st = prepare_dataset(o, train_test::letter_tokenizer());
  EXPECT_EQ(st.files, 2);
  EXPECT_EQ(st.skipped_files, 3);  // a.dat (binary), a.u8 and the second a.txt (same file)
  EXPECT_EQ(all_tokens(o.out_dir, "train"), (std::vector<int32_t>{0, 1, 2, 27, 3, 4, 27}));
  EXPECT_EQ(all_tokens(o.out_dir, "val").size(), 0u);
  // A second, smaller run into the same directory leaves no stale shards behind.
  o.shard_tokens = 2;
  prepare_dataset(o, train_test::letter_tokenizer());
  size_t n = 0;
  for (auto& e : fs::directory_iterator(o.out_dir)) n += e.path().extension() == ".tok";
  EXPECT_EQ(n, 2u);
  o.shard_tokens = 1 << 20;
  prepare_dataset(o, train_test::letter_tokenizer());
  n = 0;
  for (auto& e : fs::directory_iterator(o.out_dir)) n += e.path().extension() == ".tok";
  EXPECT_EQ(n, 1u);
  o.inputs = {root + "/nope"};
  EXPECT_THROW(prepare_dataset(o, train_test::letter_tokenizer()), Error);
}
