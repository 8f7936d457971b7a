// generate(): stop conditions, context limits, streaming, determinism, on a scripted CPU model.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "serve/chat_history.h"
#include "serve/generate.h"
#include "serve/greedy_pipe.h"
#include "fake_lm.h"

using namespace anvil;
using anvil::testing::FakeDetok;
using anvil::testing::FakeLM;

namespace {

// Vocabulary of the tests: id i < 26 is the letter 'a' + i; 26 = eos; 27 = space; 28, 29 = the two bytes of
// "é"; 30 = "<stop>" (a stop id).
constexpr int32_t kEos = 26, kSpace = 27, kE1 = 28, kE2 = 29, kStop = 30, kV = 31;
FakeDetok make_detok() {
  FakeDetok d;
  for (int i = 0; i < 26; i++) d.table.push_back(std::string(1, char('a' + i)));
  d.table.push_back("");       // eos
  d.table.push_back(" ");
  d.table.push_back("\xC3");   // first byte of U+00E9
  d.table.push_back("\xA9");
  d.table.push_back("<stop>");
  return d;
}
int32_t L(char c) { return int32_t(c - 'a'); }

// Script by position: the prompt has `prompt_len` ids; the k-th generated token is script[k].
FakeLM by_position(std::vector<int32_t> script, size_t prompt_len, int64_t max_len = 64) {
  return FakeLM(kV, max_len, kEos, [script, prompt_len](const std::vector<int32_t>& seq) {
    const size_t k = seq.size() - prompt_len;
    return script[std::min(k, script.size() - 1)];
  });
}

GenerationConfig greedy(int max_new) {
  GenerationConfig c;
  c.max_new_tokens = max_new;
  c.sampling.greedy = true;
  return c;
}

std::vector<int32_t> word(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(c == ' ' ? kSpace : L(c));
  return ids;
}

}  // namespace

TEST(Generate, PrefillsOnceThenOneTokenPerStepUntilMaxTokens) {
  const std::vector<int32_t> prompt = word("hi");
  FakeLM m = by_position(word("hello world"), prompt.size());
  FakeDetok d = make_detok();
  std::string streamed;
  auto r = generate(m, d.fns(), prompt, greedy(5), [&](std::string_view t) { streamed += t; });
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  EXPECT_EQ(r.ids, word("hello"));
  EXPECT_EQ(m.step_T, (std::vector<int>{2, 1, 1, 1, 1}));  // the last token is never fed back
  EXPECT_EQ(r.stats.prompt_tokens, 2);
  EXPECT_EQ(r.stats.new_tokens, 5);
  EXPECT_GE(r.stats.prefill_ms, 0.0);
  EXPECT_GE(r.stats.decode_ms_per_token(), 0.0);
}

TEST(Generate, StopsAtEosAndStopIdsWithoutTheirText) {
  const std::vector<int32_t> prompt = {L('x')};
  {
    FakeLM m = by_position({L('o'), L('k'), kEos, L('z')}, 1);
    FakeDetok d = make_detok();
    auto r = generate(m, d.fns(), prompt, greedy(10));
    EXPECT_EQ(r.stop, StopReason::eos);
    EXPECT_EQ(r.ids, (std::vector<int32_t>{L('o'), L('k'), kEos}));
    EXPECT_EQ(r.text, "ok");
  }
  {
    FakeLM m = by_position({L('o'), kEos, L('z')}, 1);
    FakeDetok d = make_detok();
    auto c = greedy(10);
    c.stop_at_eos = false;
    auto r = generate(m, d.fns(), prompt, c);
    EXPECT_EQ(r.stop, StopReason::max_tokens);
    EXPECT_EQ(r.text, "ozzzzzzzz");
  }
  {
    FakeLM m = by_position({L('o'), kStop, L('z')}, 1);
    FakeDetok d = make_detok();
    auto c = greedy(10);
    c.stop_ids = {kStop};
    auto r = generate(m, d.fns(), prompt, c);
    EXPECT_EQ(r.stop, StopReason::stop_id);
    EXPECT_EQ(r.text, "o");
    EXPECT_EQ(r.ids.back(), kStop);
  }
}

TEST(Generate, StopStringAcrossTokensIsNeverStreamed) {
  const std::vector<int32_t> prompt = {L('x')};
  FakeLM m = by_position(word("say stop now"), 1);
  FakeDetok d = make_detok();
  auto c = greedy(20);
  c.stop_strings = {"top", "sax"};  // "sa" is held back until "y" rules "sax" out
  std::vector<std::string> chunks;
  auto r = generate(m, d.fns(), prompt, c, [&](std::string_view t) { chunks.emplace_back(t); });
  EXPECT_EQ(r.stop, StopReason::stop_string);
  EXPECT_EQ(r.text, "say s");
  std::string joined;
  for (auto& s : chunks) joined += s;
  EXPECT_EQ(joined, r.text);
  EXPECT_EQ(chunks.front(), "say");  // "s", "sa" held, released with "y"
  EXPECT_EQ(r.ids.size(), 8u);       // s a y ' ' s t o p: the match completes with 'p'
}

TEST(Generate, StopStringFilterHoldsOnlyPossiblePrefixes) {
  StopStringFilter f({"</s>", "\n\nUser:"});
  EXPECT_EQ(f.push("hello <"), "hello ");
  EXPECT_EQ(f.push("b>"), "<b>");
  EXPECT_EQ(f.push("x\n"), "x");
  EXPECT_EQ(f.push("\nUs"), "");
  EXPECT_EQ(f.push("ed"), "\n\nUsed");
  EXPECT_EQ(f.push("a</"), "a");
  EXPECT_EQ(f.finish(), "</");
  StopStringFilter g({"ab"});
  EXPECT_EQ(g.push("xxa"), "xx");
  EXPECT_EQ(g.push("bcd"), "");
  EXPECT_TRUE(g.matched());
  EXPECT_EQ(g.push("more"), "");
  EXPECT_EQ(g.finish(), "");
  StopStringFilter none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

TEST(Generate, PromptLongerThanTheContextThrows) {
  FakeLM m = by_position({L('a')}, 10, /*max_len=*/8);
  FakeDetok d = make_detok();
  const std::vector<int32_t> prompt(10, L('p'));
  try {
    generate(m, d.fns(), prompt, greedy(4));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt of 10 tokens exceeds the context of 8"), std::string::npos)
        << e.what();
  }
  auto c = greedy(4);
  c.context = 5;  // a narrower context than the model's
  FakeLM m2 = by_position({L('a')}, 6, 8);
  EXPECT_THROW(generate(m2, d.fns(), std::vector<int32_t>(6, 0), c), Error);
  c.context = 9;  // wider than the model's
  EXPECT_THROW(generate(m2, d.fns(), std::vector<int32_t>(2, 0), c), Error);
  EXPECT_THROW(generate(m2, d.fns(), {}, greedy(4)), Error);
  EXPECT_THROW(generate(m2, d.fns(), {kV}, greedy(4)), Error);
}

TEST(Generate, EndsWhenTheContextIsFull) {
  // 6 prompt tokens in a context of 8: 3 tokens can be sampled (2 fed back), not the 10 asked for.
  FakeLM m = by_position(word("abcdefghij"), 6, 8);
  FakeDetok d = make_detok();
  auto r = generate(m, d.fns(), std::vector<int32_t>(6, L('p')), greedy(10));
  EXPECT_EQ(r.stop, StopReason::context);
  EXPECT_EQ(r.text, "abc");
  EXPECT_EQ(m.step_T, (std::vector<int>{6, 1, 1}));
  // A prompt that fills the context exactly still gets one token.
  FakeLM full = by_position(word("q"), 8, 8);
  auto r2 = generate(full, d.fns(), std::vector<int32_t>(8, L('p')), greedy(10));
  EXPECT_EQ(r2.text, "q");
  EXPECT_EQ(r2.stop, StopReason::context);
}

TEST(Generate, StreamingConcatenationEqualsTheTextAndHoldsSplitCharacters) {
  const std::vector<int32_t> prompt = word("ab");
  FakeLM m = by_position({L('c'), kE1, kE2, kSpace, kE1}, 2);  // "cé " then a dangling first byte
  FakeDetok d = make_detok();
  auto c = greedy(5);
  c.echo = true;
  std::vector<std::string> chunks;
  auto r = generate(m, d.fns(), prompt, c, [&](std::string_view t) { chunks.emplace_back(t); });
  std::string joined;
  for (auto& s : chunks) {
    EXPECT_FALSE(s.empty());
    joined += s;
  }
  EXPECT_EQ(chunks[0], "ab");  // the echoed prompt
  EXPECT_EQ(joined, "ab" + r.text);
  EXPECT_EQ(r.text, "c\xC3\xA9 \xC3");  // flush() releases the incomplete byte at the end
  EXPECT_EQ(chunks[1], "c");
  EXPECT_EQ(chunks[2], "\xC3\xA9");      // the two halves came out together
}

TEST(Generate, SameSeedSameTextOtherSeedOtherText) {
  // Flat logits: every token equally likely, so the text is the seed's alone.
  auto run = [](uint64_t seed) {
    FakeLM m(kV, 256, -1, [](const std::vector<int32_t>&) { return 0; }, 0.f);
    FakeDetok d = make_detok();
    GenerationConfig c;
    c.max_new_tokens = 40;
    c.seed = seed;
    c.stop_at_eos = false;
    return generate(m, d.fns(), {1, 2, 3}, c).ids;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Generate, RepetitionPenaltyReachesThePrompt) {
  // The model prefers 'a' slightly over 'b'; 'a' is in the prompt, so a strong penalty flips the choice.
  FakeLM m(kV, 64, kEos, [](const std::vector<int32_t>&) { return L('a'); }, 1.f);
  m.base_[size_t(L('b'))] = 0.9f;
  FakeDetok d = make_detok();
  auto c = greedy(1);
  c.sampling.repetition_penalty = 2.f;
  EXPECT_EQ(generate(m, d.fns(), {L('a')}, c).text, "b");
  c.repetition_includes_prompt = false;
  EXPECT_EQ(generate(m, d.fns(), {L('a')}, c).text, "a");
}

TEST(ChatHistory, DropsTheOldestTurnsAndKeepsTheSystemMessage) {
  struct Msg {
    std::string role, content;
  };
  auto count = [](const std::vector<Msg>& ms) {
    size_t n = 0;
    for (auto& m : ms) n += m.content.size();
    return n;
  };
  std::vector<Msg> h = {{"system", "SS"}, {"user", "u1u1"}, {"assistant", "a1a1"},
                        {"user", "u2u2"}, {"assistant", "a2a2"}, {"user", "u3"}};
  EXPECT_TRUE(trim_chat_history(h, 100, count));
  EXPECT_EQ(h.size(), 6u);
  EXPECT_TRUE(trim_chat_history(h, 12, count));  // 20 -> drops u1/a1 (12) which fits
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].role, "system");
  EXPECT_EQ(h[1].content, "u2u2");
  EXPECT_FALSE(trim_chat_history(h, 3, count));  // even "SS" + "u3" does not fit
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].content, "u3");
}

// Greedy generation picks through GreedyPipe (argmax_rows on the model's device); bad logits must still fail in
// the host sampler's words, on both paths.
TEST(Generate, BadLogitsFailAlikeOnTheGreedyAndSamplingPaths) {
  FakeDetok d = make_detok();
  auto fails_with = [&](GenerationConfig c, const std::string& needle) {
    FakeLM m = by_position({L('a')}, 1);
    m.base_[3] = NAN;
    try {
      generate(m, d.fns(), {L('x')}, c);
      return std::string("no error");
    } catch (const Error& e) {
      const std::string w = e.what();
      return w.find(needle) != std::string::npos ? std::string() : w;
    }
  };
  GenerationConfig sampled = greedy(4);
  sampled.sampling.greedy = false;
  sampled.sampling.temperature = 0.7f;
  EXPECT_EQ(fails_with(greedy(4), "nan at id 3"), "");
  EXPECT_EQ(fails_with(sampled, "nan at id 3"), "");
}

TEST(GreedyPipe, PicksComeBackInOrderAndAtMostTwoWait) {
  GreedyPipe pipe(Device::cpu(), 2);
  Tensor logits = Tensor::from_floats({0, 5, 1, /**/ 7, 7, 2}, {2, 3}, DType::f32, Device::cpu());
  pipe.pick(logits);
  EXPECT_EQ(pipe.ids().to_floats(), (std::vector<float>{1, 0}));  // ties: the lower id
  Tensor next = Tensor::from_floats({0, 1, 9, /**/ -INFINITY, 3, -1}, {2, 3}, DType::f32, Device::cpu());
  pipe.pick(next);
  EXPECT_THROW(pipe.pick(next), Error);
  EXPECT_EQ(pipe.take(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(pipe.take(), (std::vector<int32_t>{2, 1}));
  EXPECT_THROW(pipe.take(), Error);
  Tensor masked = Tensor::from_floats({-INFINITY, -INFINITY, -INFINITY, /**/ 0, INFINITY, 0}, {2, 3}, DType::f32,
                                      Device::cpu());
  pipe.pick(masked);
  try {
    pipe.take();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("every logit -inf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pipe.pick(Tensor::zeros({3, 3}, DType::f32, Device::cpu())), Error);  // 3 rows, not 2
}
