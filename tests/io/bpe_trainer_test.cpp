// anvil's BPE trainer: its tokenizer.json loads in anvil and in the Python `tokenizers` library, and both
// give the same ids; training is deterministic; bad options are refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/bpe_trainer.h"
#include "io/tokenizer.h"
#include "tokenizer_test_util.h"

using namespace anvil;
using namespace anvil::tok_test;

namespace {

std::string corpus_path() { return fixture_dir() + "/corpus.txt"; }

std::string train(const std::string& style, int32_t vocab) {
  BpeTrainOptions o;
  o.style = style;
  o.vocab_size = vocab;
  return train_bpe_files({corpus_path()}, o);
}

TEST(BpeTrainer, TrainsLoadsAndRoundTrips) {
  std::string corpus = read_text(corpus_path());
  for (const char* style : {"llama3", "neox"}) {
    std::string j = train(style, 1200);
    EXPECT_EQ(j, train(style, 1200)) << style << ": training is not deterministic";
    Tokenizer tok = Tokenizer::from_json_string(j, style);
    EXPECT_EQ(tok.vocab_size(), 1200) << style;
    auto ids = tok.encode(corpus, false);
    EXPECT_EQ(tok.decode(ids, false), corpus) << style;
    // A learnt vocabulary compresses: well under the 1 byte per token of the bare byte alphabet.
    double bytes_per_token = double(corpus.size()) / double(ids.size());
    std::printf("train_bpe %s: vocab 1200, %.2f bytes/token on the training corpus\n", style, bytes_per_token);
    EXPECT_GT(bytes_per_token, 2.0) << style;
    if (std::string(style) == "llama3") {
      EXPECT_EQ(tok.encode("hi", true).front(), tok.token_to_id("<|begin_of_text|>"));
      EXPECT_EQ(tok.bos_id(), 0);
    } else {
      EXPECT_EQ(tok.eos_id(), 0);
    }
  }
}

TEST(BpeTrainer, PythonLoadsTrainedFileWithIdenticalIds) {
  if (!python_has_tokenizers()) GTEST_SKIP() << "python3 with the `tokenizers` package not found: pip install tokenizers";
  for (const char* style : {"llama3", "neox"}) {
    std::string path = (std::filesystem::temp_directory_path() /
                        str("anvil_trained_", getpid(), "_", style, ".json")).string();
    std::string j = train(style, 1500);
    std::ofstream(path, std::ios::binary) << j;
    Tokenizer tok = Tokenizer::from_file(path);
    std::string out = run_command(str("python3 ", ANVIL_SOURCE_DIR, "/tools/tokenizer_parity.py --tokenizer ", path,
                                      " --seed 11 --n 300"));
    auto lines = parse_lines(out);
    ASSERT_EQ(lines.size(), 300u) << style;
    EXPECT_EQ(compare_encodings(tok, lines, str("trained ", style)), 0) << style;
    std::filesystem::remove(path);
  }
}

TEST(BpeTrainer, RefusesBadOptions) {
  BpeTrainOptions o;
  o.vocab_size = 100;  // below 5 specials + 256 bytes
  EXPECT_THROW(train_bpe_files({corpus_path()}, o), Error);
  o.vocab_size = 1000;
  o.style = "sentencepiece";
  EXPECT_THROW(train_bpe_files({corpus_path()}, o), Error);
  o.style = "llama3";
  o.special_tokens = {"<|eot_id|>"};  // the llama3 template needs <|begin_of_text|>
  EXPECT_THROW(train_bpe_files({corpus_path()}, o), Error);
  o.special_tokens = {};
  EXPECT_THROW(train_bpe_files({"/nonexistent/corpus.txt"}, o), Error);
}

}  // namespace
