// Parity of anvil's tokenizer with the Python `tokenizers` library: committed expected ids (always), a live
// comparison on fresh text when Python has the library, round trips, streaming decode, chat format, errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "io/tokenizer.h"
#include "io/unicode.h"
#include "tokenizer_test_util.h"

using namespace anvil;
using namespace anvil::tok_test;

namespace {

const char* kNames[] = {"llama3", "neox"};

Tokenizer load(const std::string& name) { return Tokenizer::from_file(fixture_dir() + "/" + name + "/tokenizer.json"); }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("anvil_tok_" + std::to_string(getpid()) + "_" + name)).string();
}

void write_text(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

TEST(Tokenizer, CommittedExpectedIds) {
  for (const char* name : kNames) {
    Tokenizer tok = load(name);
    auto lines = parse_lines(read_text(fixture_dir() + "/expected_" + name + ".jsonl"));
    ASSERT_GT(lines.size(), 100u) << name;
    EXPECT_EQ(compare_encodings(tok, lines, name), 0) << name;
    int decoded = 0;
    for (const auto& l : lines) {
      if (!l.contains("decode")) continue;
      auto ids = l["decode"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok.decode(ids, false), l["text"].get<std::string>()) << name << " decode " << ids_str(ids);
      EXPECT_EQ(tok.decode(ids, true), l["text_skip"].get<std::string>()) << name << " decode(skip) " << ids_str(ids);
      ++decoded;
    }
    EXPECT_GT(decoded, 10) << name;
  }
}

TEST(Tokenizer, LiveParityWithPython) {
  if (!python_has_tokenizers()) GTEST_SKIP() << "python3 with the `tokenizers` package not found: pip install tokenizers";
  const char* env = std::getenv("ANVIL_SEED");
  unsigned seed = env ? unsigned(std::strtoul(env, nullptr, 10)) : unsigned(std::time(nullptr));
  std::printf("tokenizer live parity: seed %u (set ANVIL_SEED to repeat)\n", seed);
  for (const char* name : kNames) {
    std::string path = fixture_dir() + "/" + name + "/tokenizer.json";
    std::string out = run_command(str("python3 ", ANVIL_SOURCE_DIR, "/tools/tokenizer_parity.py --tokenizer ", path,
                                      " --seed ", seed, " --n 400"));
    auto lines = parse_lines(out);
    ASSERT_EQ(lines.size(), 400u) << name;
    EXPECT_EQ(compare_encodings(load(name), lines, name), 0) << name << " seed " << seed;
  }
}

// The neox fixture's "ŋŋ" is a single_word added token: it matches only at word boundaries as the Rust regex
// crate's \w draws them (Nd digits join a word, the No superscripts ² ³ do not). Expected tokens from the
// `tokenizers` library; a \p{N} word class split " ŋŋ²" into bytes (live parity seed 1764470017).
TEST(Tokenizer, SingleWordBoundariesFollowTheLibrary) {
  Tokenizer tok = load("neox");
  auto tokens = [&](const std::string& text) {
    std::vector<std::string> out;
    for (int32_t id : tok.encode(text, false)) out.push_back(tok.id_to_token(id));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(tokens(" \u014b\u014b\u00b2"), (V{"\u0120", "\u014b\u014b", "\u00c2", "\u00b2"}));
  EXPECT_EQ(tokens("\u014b\u014b\u00b2\u00b3"), (V{"\u014b\u014b", "\u00c2\u00b2\u00c2\u00b3"}));
  EXPECT_EQ(tokens(" \u014b\u014b1"), (V{"\u0120", "\u00c5", "\u012d", "\u00c5", "\u012d", "1"}));
  EXPECT_EQ(tokens("a\u014b\u014b"), (V{"a", "\u00c5", "\u012d", "\u00c5", "\u012d"}));
}

TEST(Tokenizer, RoundTripAndThroughput) {
  std::string corpus = read_text(fixture_dir() + "/corpus.txt");
  ASSERT_GT(corpus.size(), 40000u);
  for (const char* name : kNames) {
    Tokenizer tok = load(name);
    // The neox fixture's <mask> (lstrip) and [[tool]] (rstrip) swallow whitespace by design: take them out.
    std::string text = corpus;
    for (std::string t : {"<mask>", "[[tool]]"})
      for (size_t p; std::string(name) == "neox" && (p = text.find(t)) != std::string::npos;) text.erase(p, t.size());
    auto ids = tok.encode(text, false);
    EXPECT_EQ(tok.decode(ids, false), text) << name;
    std::istringstream in(text);
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines)
      EXPECT_EQ(tok.decode(tok.encode(line, true), false), (tok.bos_id() >= 0 ? "<|begin_of_text|>" : "") + line)
          << name;
    EXPECT_GT(lines, 100) << name;
    std::string big;
    for (int i = 0; i < 20; ++i) big += text;  // ~1 MB, so the word cache warms up as in real use
    auto t0 = std::chrono::steady_clock::now();
    auto big_ids = tok.encode(big, false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("tokenizer %s: encode %.1f MB/s (%zu bytes -> %zu ids, %.2f bytes/token)\n", name,
                double(big.size()) / 1e6 / s, big.size(), big_ids.size(), double(big.size()) / double(big_ids.size()));
    EXPECT_EQ(tok.decode(big_ids, false).size(), big.size()) << name;
  }
}

TEST(Tokenizer, StreamDecoderEmitsCompleteCharacters) {
  std::string corpus = read_text(fixture_dir() + "/corpus.txt");
  for (const char* name : kNames) {
    Tokenizer tok = load(name);
    auto ids = tok.encode(corpus, false);
    for (bool skip : {false, true}) {
      StreamDecoder d(tok, skip);
      std::string all;
      for (int32_t id : ids) {
        std::string piece = d.push(id);
        ASSERT_EQ(unicode::utf8_find_invalid(piece), std::string::npos) << name << ": partial UTF-8 emitted";
        all += piece;
      }
      all += d.flush();
      EXPECT_EQ(all, tok.decode(ids, skip)) << name;
    }
    // A character split across tokens: emoji bytes arrive one token at a time.
    std::string raw;
    for (int32_t id : tok.encode("🤖", false)) raw += tok.decode_token(id);
    EXPECT_EQ(raw, "🤖") << name;
  }
}

TEST(Tokenizer, SpecialTokensAndIds) {
  Tokenizer l = load("llama3");
  EXPECT_EQ(l.bos_id(), l.token_to_id("<|begin_of_text|>"));
  EXPECT_EQ(l.eos_id(), l.token_to_id("<|end_of_text|>"));
  auto stops = l.stop_ids();
  EXPECT_NE(std::find(stops.begin(), stops.end(), l.token_to_id("<|eot_id|>")), stops.end());
  EXPECT_EQ(l.vocab_size(), 2000);
  EXPECT_TRUE(l.is_special(l.bos_id()));
  EXPECT_EQ(l.encode("hi", true).front(), l.bos_id());
  EXPECT_EQ(l.encode("<|eot_id|>", false), std::vector<int32_t>{l.token_to_id("<|eot_id|>")});
  EXPECT_EQ(l.id_to_token(l.token_to_id("Ġthe")), "Ġthe");
  EXPECT_EQ(l.decode_token(l.token_to_id("Ġthe")), " the");
  EXPECT_EQ(l.token_to_id("no such token"), -1);
  EXPECT_EQ(l.id_to_token(123456), "");
  EXPECT_EQ(l.decode({l.bos_id(), 123456, -5}, false), "<|begin_of_text|>");  // unknown ids are skipped
  EXPECT_THROW(l.encode(std::string("bad \xC3\x28 utf8"), false), Error);
  Tokenizer n = load("neox");
  EXPECT_EQ(n.eos_id(), n.token_to_id("<|endoftext|>"));
  EXPECT_EQ(n.bos_id(), -1);
  EXPECT_EQ(n.vocab_size(), 2004);
  EXPECT_FALSE(n.is_special(n.token_to_id("[[tool]]")));
  EXPECT_EQ(n.decode(n.encode("a [[tool]]   b <mask>", false), true), "a [[tool]]b");  // rstrip, lstrip
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  // encode() is const and shares one word cache: threads must see the same ids as a lone caller.
  std::string corpus = read_text(fixture_dir() + "/corpus.txt");
  std::vector<std::string> lines;
  std::istringstream in(corpus);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  Tokenizer warm = load("neox"), cold = load("neox");
  std::vector<std::vector<int32_t>> want;
  for (const auto& l : lines) want.push_back(warm.encode(l, true));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = size_t(t); i < lines.size() * 4; i += 3) bad[size_t(t)] += cold.encode(lines[i % lines.size()], true) != want[i % lines.size()];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[size_t(t)], 0) << "thread " << t;
}

TEST(Tokenizer, Llama3ChatTemplate) {
  Tokenizer l = load("llama3");
  std::vector<ChatMessage> msgs = {{"system", "  Be brief.\n"}, {"user", "Hi!"}};
  std::string text = l.apply_chat_template_llama3(msgs, true);
  EXPECT_EQ(text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  auto ids = l.encode(text, false);
  EXPECT_EQ(ids.front(), l.bos_id());
  EXPECT_EQ(l.decode(ids, false), text);
  EXPECT_THROW(load("neox").apply_chat_template_llama3(msgs, true), Error);
}

TEST(Tokenizer, MergesInBothFormats) {
  // The llama3 fixture stores merges as [a, b] pairs, neox as "a b" strings; each converted to the other
  // format must give the same ids.
  std::string corpus = read_text(fixture_dir() + "/corpus.txt");
  for (const char* name : kNames) {
    auto j = nlohmann::json::parse(read_text(fixture_dir() + "/" + name + "/tokenizer.json"));
    for (auto& m : j["model"]["merges"]) {
      if (m.is_string()) {
        std::string s = m.get<std::string>();
        m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
      } else {
        m = m[0].get<std::string>() + " " + m[1].get<std::string>();
      }
    }
    Tokenizer other = Tokenizer::from_json_string(j.dump(), name);
    EXPECT_EQ(other.encode(corpus, true), load(name).encode(corpus, true)) << name;
  }
}

TEST(Tokenizer, LongRunsAndNfcNormalizer) {
  // Long runs stress the regex (no JIT stack overflow) and the merge loop (words past the cache limit).
  Tokenizer l = load("llama3");
  for (const std::string& s : {std::string(100000, ' '), std::string(50000, '\n'), std::string(60000, '7'),
                               std::string(40000, 'q')}) {
    auto ids = l.encode(s, false);
    EXPECT_EQ(l.decode(ids, false), s);
  }
  // GPT-NeoX files declare an NFC normalizer: accepted (not applied), so NFC text encodes as without it.
  auto j = nlohmann::json::parse(read_text(fixture_dir() + "/neox/tokenizer.json"));
  j["normalizer"] = {{"type", "NFC"}};
  Tokenizer nfc = Tokenizer::from_json_string(j.dump(), "neox+NFC");
  std::string text = "Café déjà vu, 日本語 🤖";
  EXPECT_EQ(nfc.encode(text, true), load("neox").encode(text, true));
}

TEST(Tokenizer, ErrorsNameFileAndField) {
  auto expect_error = [](const std::string& json_text, const std::string& needle) {
    std::string path = temp_path("bad.json");
    write_text(path, json_text);
    try {
      Tokenizer::from_file(path);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  };
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.json"), std::string::npos) << e.what();
  }
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {", "valid JSON");
  expect_error("[1, 2]", "JSON object");
  expect_error("{\"normalizer\": null}", "'model'");
  expect_error(R"({"model": {"type": "WordPiece", "vocab": {}}})", "model.type");
  expect_error(R"({"model": {"type": "Unigram", "vocab": []}})", "model.type");
  expect_error(R"({"model": {"type": "BPE", "merges": []}})", "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}, "normalizer": null,
                 "pre_tokenizer": null})", "model.merges[0]");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Lowercase"},
                 "pre_tokenizer": null})", "normalizer");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": null,
                 "pre_tokenizer": {"type": "Metaspace"}})", "pre_tokenizer.type");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": null,
                 "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"}})",
               "pre_tokenizer.pattern");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": null,
                 "pre_tokenizer": null, "decoder": {"type": "WordPiece"}})", "decoder.type");
}

}  // namespace
