#include "io/added_tokens.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "io/pretokenizer.h"
#include "io/unicode.h"

namespace anvil {

AddedTokens AddedTokens::from_json(const nlohmann::json& list, const std::string& file) {
  using namespace jsonf;
  if (!list.is_array()) ANVIL_THROW(file, "field 'added_tokens' to be an array", list.type_name());
  AddedTokens a;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    std::string f = str("added_tokens[", i, "]");
    const auto& idv = field(e, "id", file, f + ".id");
    if (!idv.is_number_integer() || idv.get<int64_t>() < 0 || idv.get<int64_t>() > INT32_MAX)
      ANVIL_THROW(file, str("field '", f, ".id' to be a non-negative int32"), idv.dump());
    Token t{get_string(e, "content", file, f + ".content"), idv.get<int32_t>(),
            get_bool(e, "special", false, file, f + ".special"), get_bool(e, "lstrip", false, file, f + ".lstrip"),
            get_bool(e, "rstrip", false, file, f + ".rstrip"),
            get_bool(e, "single_word", false, file, f + ".single_word"),
            get_bool(e, "normalized", !get_bool(e, "special", false, file, f + ".special"), file, f + ".normalized")};
    if (t.content.empty()) continue;  // the Python library ignores empty added tokens
    auto idx = int32_t(a.tokens_.size());
    a.by_content_[t.content] = idx;
    a.by_id_[t.id] = idx;
    a.max_id_ = std::max(a.max_id_, t.id);
    a.tokens_.push_back(std::move(t));
  }
  for (int32_t i = 0; i < int32_t(a.tokens_.size()); ++i) {
    const Token& t = a.tokens_[size_t(i)];
    if (a.by_content_[t.content] != i) continue;  // a repeated content: the last entry wins
    Set& s = t.normalized ? a.normalized_ : a.raw_;
    s.by_first_byte[static_cast<unsigned char>(t.content[0])].push_back(i);
    s.empty = false;
  }
  for (Set* s : {&a.raw_, &a.normalized_})
    for (auto& v : s->by_first_byte)
      std::stable_sort(v.begin(), v.end(), [&](int32_t x, int32_t y) {
        return a.tokens_[size_t(x)].content.size() > a.tokens_[size_t(y)].content.size();
      });
  return a;
}

int32_t AddedTokens::id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? -1 : tokens_[size_t(it->second)].id;
}

const std::string* AddedTokens::content(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[size_t(it->second)].content;
}

bool AddedTokens::is_special(int32_t id) const {
  auto it = by_id_.find(id);
  return it != by_id_.end() && tokens_[size_t(it->second)].special;
}

namespace {

// The code point that starts at s[i] / ends at s[i] (exclusive); `s` is valid UTF-8.
uint32_t cp_at(std::string_view s, size_t i) {
  return unicode::utf8_step(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i).cp;
}
size_t prev_start(std::string_view s, size_t i) {
  do --i; while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  return i;
}
// Unicode \w as the Rust regex crate (which the Python library runs) defines it: Alphabetic, marks, decimal
// digits (Nd only: superscripts such as U+00B2 are No and do not join a word), connector punctuation and the
// two join controls. \p{N} here had made "ŋŋ²" fail a single_word token's boundary test that the library passes.
bool is_word_char(uint32_t cp) {
  static const Regex word(R"(^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", false, "word-character class");
  std::string s;
  unicode::utf8_append(s, cp);
  std::vector<Regex::Match> m;
  word.find_all(s, m);
  return !m.empty();
}

}  // namespace

void AddedTokens::split_with(const Set& set, std::string_view text, std::vector<Segment>& out) const {
  size_t start_offset = 0, i = 0;
  while (i < text.size()) {
    const auto& cands = set.by_first_byte[static_cast<unsigned char>(text[i])];
    const Token* hit = nullptr;
    for (int32_t c : cands) {
      const Token& t = tokens_[size_t(c)];
      if (t.content.size() <= text.size() - i && std::memcmp(text.data() + i, t.content.data(), t.content.size()) == 0) {
        hit = &t;
        break;
      }
    }
    if (!hit) { ++i; continue; }
    size_t start = i, stop = i + hit->content.size();
    if (hit->single_word) {
      bool word_before = start > 0 && is_word_char(cp_at(text, prev_start(text, start)));
      bool word_after = stop < text.size() && is_word_char(cp_at(text, stop));
      if (word_before || word_after) { i = stop; continue; }  // matches are non-overlapping: skip past it
    }
    if (hit->lstrip) {
      size_t s = start;
      while (s > start_offset && unicode::is_white_space(cp_at(text, prev_start(text, s)))) s = prev_start(text, s);
      start = s;
    }
    if (hit->rstrip) {
      while (stop < text.size() && unicode::is_white_space(cp_at(text, stop)))
        stop += size_t(unicode::utf8_len(static_cast<unsigned char>(text[stop])));
    }
    if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), -1});
    out.push_back({text.substr(start, stop - start), hit->id});
    start_offset = stop;
    i = stop;
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

void AddedTokens::split(std::string_view text, std::vector<Segment>& out) const {
  if (text.empty()) return;
  if (raw_.empty && normalized_.empty) { out.push_back({text, -1}); return; }
  std::vector<Segment> first;
  if (raw_.empty) first.push_back({text, -1});
  else split_with(raw_, text, first);
  if (normalized_.empty) { out.insert(out.end(), first.begin(), first.end()); return; }
  for (const auto& s : first) {
    if (s.id >= 0) out.push_back(s);
    else split_with(normalized_, s.text, out);
  }
}

}  // namespace anvil
