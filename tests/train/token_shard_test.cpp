#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_data.h"
#include "train/checksum.h"
#include "train/token_shard.h"

using namespace anvil;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::string& path) {
  try {
    TokenShard s(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c;
  f.get(c);
  f.seekp(std::streamoff(offset));
  f.put(char(c ^ 0x10));
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Checksum, KnownValues) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32("", 0), 0u);
  std::string s(1000, 'x');
  EXPECT_EQ(crc32(s.data() + 3, 997, crc32(s.data(), 3)), crc32(s.data(), 1000));  // running form
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(TokenShard, RoundTripU16AndU32) {
  train_test::Scratch dir_scratch("shard_rt");
  const std::string& dir = dir_scratch.path;
  for (uint32_t vocab : {65536u, 65537u, 128256u}) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 1001; i++) tokens.push_back(int32_t((uint64_t(i) * 7919) % vocab));
    ShardInfo in;
    in.tokenizer_id = 42;
    in.vocab_size = vocab;
    in.eos_id = 0;
    in.n_docs = 3;
    std::string path = dir + "/s.tok";
    write_shard(path, tokens, in);
    EXPECT_EQ(fs::file_size(path), 64 + tokens.size() * (vocab <= 65536 ? 2 : 4));
    TokenShard s(path);
    EXPECT_EQ(s.size(), 1001);
    EXPECT_EQ(s.info().tokenizer_id, 42u);
    EXPECT_EQ(s.info().n_docs, 3u);
    EXPECT_EQ(s.info().token_bytes, vocab <= 65536 ? 2u : 4u);
    std::vector<int32_t> back(tokens.size());
    s.read(0, int64_t(back.size()), back.data());
    EXPECT_EQ(back, tokens);
    EXPECT_THROW(s.read(1000, 2, back.data()), Error);
  }
  EXPECT_FALSE(fs::exists(dir + "/s.tok" + ".tmp." + std::to_string(::getpid())));
}

TEST(TokenShard, OutOfRangeTokensAreRefusedAtWrite) {
  train_test::Scratch dir_scratch("shard_range");
  const std::string& dir = dir_scratch.path;
  ShardInfo in;
  in.vocab_size = 100;
  in.eos_id = 99;
  EXPECT_THROW(write_shard(dir + "/s.tok", {1, 2, 100}, in), Error);
  EXPECT_THROW(write_shard(dir + "/s.tok", {1, -1}, in), Error);
  EXPECT_FALSE(fs::exists(dir + "/s.tok"));
}

TEST(TokenShard, CorruptionIsAnErrorNamingFileAndProblem) {
  train_test::Scratch dir_scratch("shard_bad");
  const std::string& dir = dir_scratch.path;
  std::vector<int32_t> tokens(500);
  for (int i = 0; i < 500; i++) tokens[size_t(i)] = i % 50;
  ShardInfo in;
  in.vocab_size = 50;
  in.eos_id = 49;
  std::string good = dir + "/good.tok";
  write_shard(good, tokens, in);

  std::string t = dir + "/truncated.tok";
  fs::copy_file(good, t);
  fs::resize_file(t, fs::file_size(good) - 3);
  std::string e = error_of(t);
  EXPECT_TRUE(has(e, "truncated.tok") && has(e, "truncated")) << e;
  fs::resize_file(t, 40);
  e = error_of(t);
  EXPECT_TRUE(has(e, "header") && has(e, "truncated.tok")) << e;

  std::string p = dir + "/payload.tok";
  fs::copy_file(good, p);
  flip_byte(p, 64 + 123);
  e = error_of(p);
  EXPECT_TRUE(has(e, "payload.tok") && has(e, "payload crc32") && has(e, "corrupted")) << e;

  std::string h = dir + "/header.tok";
  fs::copy_file(good, h);
  flip_byte(h, 20);  // inside tokenizer_id
  e = error_of(h);
  EXPECT_TRUE(has(e, "header.tok") && has(e, "header crc32")) << e;

  std::string m = dir + "/magic.tok";
  fs::copy_file(good, m);
  flip_byte(m, 0);
  EXPECT_TRUE(has(error_of(m), "ANVILTOK"));

  std::string x = dir + "/extra.tok";
  fs::copy_file(good, x);
  std::ofstream(x, std::ios::app) << "zz";
  EXPECT_TRUE(has(error_of(x), "trailing"));
  EXPECT_TRUE(has(error_of(dir + "/missing.tok"), "missing.tok"));
}
