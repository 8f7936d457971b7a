#include "io/bpe_trainer.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "io/added_tokens.h"
#include "io/pretokenizer.h"
#include "io/unicode.h"

namespace anvil {

namespace {

using ojson = nlohmann::ordered_json;

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

struct Word {
  std::vector<int32_t> syms;
  int64_t count;
};

using Counts = std::unordered_map<std::string, int64_t>;

// Adds the words of one text to `counts`; "" on success, else what is wrong with the text.
std::string count_text(std::string_view text, const PreTokenizer& pre, const AddedTokens& specials, Counts& counts) {
  size_t bad = unicode::utf8_find_invalid(text);
  if (bad != std::string::npos) return str("an invalid UTF-8 sequence at offset ", bad, " of a text");
  std::vector<AddedTokens::Segment> segs;
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  try {
    specials.split(text, segs);
    for (const auto& s : segs) {
      if (s.id >= 0) continue;
      pre.run(s.text, pieces, arena);
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  for (std::string_view p : pieces) ++counts[std::string(p)];
  return "";
}

// Distinct pre-tokenized words of the corpus with their counts, keyed by raw bytes. Texts are gathered in
// batches of ~32 MB and pre-tokenized on all cores (regex splitting dominates); the counts are sums, so
// the result does not depend on the thread count.
Counts count_words(const TextSource& next_text, const PreTokenizer& pre, const AddedTokens& specials,
                   const BpeTrainOptions& o, size_t& total_bytes) {
  Counts counts;
  std::vector<std::string> batch;
  size_t batch_bytes = 0, next_report = size_t(64) << 20;
  auto flush = [&] {
    int nt = 1;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    std::vector<Counts> local(static_cast<size_t>(nt));
    std::vector<std::string> errors(batch.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < int64_t(batch.size()); ++i) {
      int t = 0;
#ifdef _OPENMP
      t = omp_get_thread_num();
#endif
      errors[size_t(i)] = count_text(batch[size_t(i)], pre, specials, local[size_t(t)]);
    }
    for (const auto& e : errors)
      if (!e.empty()) ANVIL_THROW("train_bpe", "UTF-8 training text the pre-tokenizer accepts", e);
    for (auto& l : local)
      for (auto& [w, c] : l) counts[w] += c;
    batch.clear();
    batch_bytes = 0;
    if (o.progress && total_bytes >= next_report) {
      std::fprintf(stderr, "train_bpe: read %zu MB, %zu distinct words\n", total_bytes >> 20, counts.size());
      while (next_report <= total_bytes) next_report += size_t(64) << 20;
    }
  };
  std::string text;
  while (next_text(text)) {
    total_bytes += text.size();
    batch_bytes += text.size();
    batch.push_back(std::move(text));
    text.clear();
    if (batch_bytes >= (size_t(32) << 20) || batch.size() >= 65536) flush();
  }
  flush();
  return counts;
}

ojson added_token_json(int32_t id, const std::string& content) {
  return ojson{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
               {"normalized", false}, {"special", true}};
}

}  // namespace

std::string train_bpe(const TextSource& next_text, const BpeTrainOptions& o) {
  ANVIL_CHECK(o.style == "llama3" || o.style == "neox", "train_bpe", "style 'llama3' or 'neox'", o.style);
  std::vector<std::string> specials = o.special_tokens;
  if (specials.empty() && o.style == "llama3")
    specials = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  if (specials.empty()) specials = {"<|endoftext|>"};
  const std::string bos = "<|begin_of_text|>";
  if (o.style == "llama3")
    ANVIL_CHECK(std::find(specials.begin(), specials.end(), bos) != specials.end(), "train_bpe",
                "special_tokens to include <|begin_of_text|> for style llama3 (its template prepends it)", "none");
  const int32_t n_base = int32_t(specials.size()) + 256;
  ANVIL_CHECK(o.vocab_size >= n_base, "train_bpe", str("vocab_size >= ", n_base, " (specials + 256 bytes)"),
              o.vocab_size);

  ojson added = ojson::array();
  for (size_t i = 0; i < specials.size(); ++i) {
    ANVIL_CHECK(!specials[i].empty(), "train_bpe", "non-empty special tokens", str("an empty one at ", i));
    added.push_back(added_token_json(int32_t(i), specials[i]));
  }
  ojson pre_json = PreTokenizer::style_json(o.style);
  PreTokenizer pre = PreTokenizer::from_json(nlohmann::json::parse(pre_json.dump()), "train_bpe");
  AddedTokens special_set = AddedTokens::from_json(nlohmann::json::parse(added.dump()), "train_bpe");

  size_t total_bytes = 0;
  auto counts = count_words(next_text, pre, special_set, o, total_bytes);
  const bool report = o.progress && total_bytes >= (size_t(8) << 20);

  // Vocabulary: specials, then the 256 bytes in byte order, then one token per merge. Tokens are raw bytes
  // here and written in the byte-level alphabet.
  std::vector<std::string> tokens(specials.begin(), specials.end());
  std::unordered_map<std::string, int32_t> token_id;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(1, char(b));
    token_id[tokens.back()] = int32_t(tokens.size()) - 1;
  }
  // Words in sorted order so that everything downstream is independent of hash-table iteration order.
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  counts.clear();
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    Word word{{}, c};
    for (unsigned char b : w) word.syms.push_back(int32_t(specials.size()) + b);
    words.push_back(std::move(word));
  }
  sorted.clear();

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // words holding the pair (may repeat, go stale)
  for (int32_t w = 0; w < int32_t(words.size()); ++w) {
    const auto& s = words[size_t(w)].syms;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      uint64_t k = pair_key(s[i], s[i + 1]);
      pair_count[k] += words[size_t(w)].count;
      where[k].push_back(w);
    }
  }
  struct Entry { int64_t count; uint64_t key; };
  auto lower = [](const Entry& x, const Entry& y) { return x.count != y.count ? x.count < y.count : x.key > y.key; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower)> heap(lower);
  for (const auto& [k, c] : pair_count) heap.push({c, k});

  ojson merges = ojson::array();
  std::vector<int32_t> stamp(words.size(), -1);
  std::unordered_map<uint64_t, int64_t> delta;
  const int32_t n_merges = o.vocab_size - n_base;
  int32_t done = 0, vocab = n_base;
  while (vocab < o.vocab_size && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.key);
    int64_t now = pc == pair_count.end() ? 0 : pc->second;
    if (now != top.count) {  // stale: counts only fall for pairs without the new token, so re-queue
      if (now > 0) heap.push({now, top.key});
      continue;
    }
    if (top.count < std::max<int64_t>(o.min_frequency, 1)) break;
    int32_t a = int32_t(top.key >> 32), b = int32_t(uint32_t(top.key));
    std::string merged = tokens[size_t(a)] + tokens[size_t(b)];
    auto [it, fresh] = token_id.emplace(merged, int32_t(tokens.size()));
    if (fresh) { tokens.push_back(merged); ++vocab; }
    int32_t nid = it->second;
    const auto& bl = unicode::byte_level_map();
    std::string ta, tb;
    bl.encode(tokens[size_t(a)], ta);
    bl.encode(tokens[size_t(b)], tb);
    merges.push_back(ojson::array({ta, tb}));

    delta.clear();
    std::vector<int32_t> list = std::move(where[top.key]);
    where.erase(top.key);
    for (int32_t w : list) {
      if (stamp[size_t(w)] == done) continue;
      stamp[size_t(w)] = done;
      Word& word = words[size_t(w)];
      std::vector<int32_t> next;
      next.reserve(word.syms.size());
      bool hit = false;
      for (size_t i = 0; i < word.syms.size();) {
        if (i + 1 < word.syms.size() && word.syms[i] == a && word.syms[i + 1] == b) {
          next.push_back(nid);
          i += 2;
          hit = true;
        } else {
          next.push_back(word.syms[i++]);
        }
      }
      if (!hit) continue;
      for (size_t i = 0; i + 1 < word.syms.size(); ++i) delta[pair_key(word.syms[i], word.syms[i + 1])] -= word.count;
      for (size_t i = 0; i + 1 < next.size(); ++i) {
        uint64_t k = pair_key(next[i], next[i + 1]);
        delta[k] += word.count;
        if (next[i] == nid || next[i + 1] == nid) where[k].push_back(w);
      }
      word.syms = std::move(next);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& c = pair_count[k];
      c += d;
      if (d > 0) heap.push({c, k});
      if (c <= 0) pair_count.erase(k);
    }
    ++done;
    if (report && n_merges >= 10 && done % (n_merges / 10) == 0)
      std::fprintf(stderr, "train_bpe: %d / %d merges\n", done, n_merges);
  }

  ojson vocab_json = ojson::object();
  const auto& bl = unicode::byte_level_map();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i < specials.size()) { vocab_json[tokens[i]] = int32_t(i); continue; }
    std::string t;
    bl.encode(tokens[i], t);
    vocab_json[t] = int32_t(i);
  }
  ojson post = ojson{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  if (o.style == "llama3") {
    auto seq = [](const char* id, int type) { return ojson{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
    auto sp = [&](int type) { return ojson{{"SpecialToken", {{"id", bos}, {"type_id", type}}}}; };
    int32_t bos_id = int32_t(std::find(specials.begin(), specials.end(), bos) - specials.begin());
    post = ojson{{"type", "TemplateProcessing"},
                 {"single", ojson::array({sp(0), seq("A", 0)})},
                 {"pair", ojson::array({sp(0), seq("A", 0), sp(1), seq("B", 1)})},
                 {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
  }
  ojson j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
             {"normalizer", nullptr}, {"pre_tokenizer", pre_json}, {"post_processor", post},
             {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
             {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                        {"byte_fallback", false}, {"ignore_merges", o.style == "llama3"}, {"vocab", vocab_json},
                        {"merges", merges}}}};
  if (report) std::fprintf(stderr, "train_bpe: done, %zu tokens, %d merges\n", tokens.size(), done);
  return j.dump(1);
}

std::string train_bpe_files(const std::vector<std::string>& files, const BpeTrainOptions& opts) {
  size_t fi = 0;
  std::ifstream in;
  std::string carry;
  TextSource next = [&](std::string& text) {
    constexpr size_t kChunk = size_t(1) << 20;  // 1 MB reads, cut at the last line end
    while (true) {
      if (!in.is_open()) {
        if (fi == files.size()) return false;
        in.open(files[fi], std::ios::binary);
        ANVIL_CHECK(in.is_open(), "train_bpe_files", "readable training files", str("cannot open '", files[fi], "'"));
      }
      std::string buf(kChunk, '\0');
      in.read(buf.data(), std::streamsize(kChunk));
      buf.resize(size_t(in.gcount()));
      if (buf.empty()) {  // end of this file: its unterminated last line is a text of its own
        in.close();
        ++fi;
        if (carry.empty()) continue;
        text = std::move(carry);
        carry.clear();
        return true;
      }
      carry += buf;
      size_t cut = carry.rfind('\n');
      if (cut == std::string::npos) continue;
      text = carry.substr(0, cut + 1);
      carry.erase(0, cut + 1);
      return true;
    }
  };
  return train_bpe(next, opts);
}

}  // namespace anvil
