#include "io/pretokenizer.h"

#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_fields.h"
#include "io/unicode.h"

namespace anvil {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Oniguruma's \s is Unicode White_Space, which PCRE2's UCP \s lacks only U+0085 of; rewrite \s and \S so
// the two engines split text alike (U+0085 appears in the parity corpus). \S inside a class is left alone.
std::string onig_compatible(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's') out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      else if (e == 'S' && !in_class) out += "[^\\s\\x{85}]";
      else { out += c; out += e; }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is a literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
      size_t e = p.find(":]", i + 2);
      if (e != std::string::npos) { out.append(p, i, e + 2 - i); i = e + 1; continue; }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  std::string p = literal ? pattern : onig_compatible(pattern);
  uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    ANVIL_THROW(where, "a valid regex", str("'", pattern, "': ", reinterpret_cast<char*>(msg), " at offset ", off));
  }
  // JIT: ~5x faster matching; if the platform has no JIT, pcre2_match falls back to the interpreter.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, std::vector<Match>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) break;
      pcre2_match_data_free(md);
      ANVIL_THROW("tokenizer regex", "a successful match", str("PCRE2 error ", rc));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.push_back({ov[0], ov[1]});
    if (ov[1] > ov[0]) {
      pos = ov[1];
    } else {  // empty match: move on one character, as Oniguruma's iterator does
      if (ov[1] >= s.size()) break;
      pos = ov[1] + unicode::utf8_len(static_cast<unsigned char>(s[ov[1]]));
    }
  }
  pcre2_match_data_free(md);
}

namespace {

void split_piece(const PreTokenizerStep& st, std::string_view s, std::vector<std::string_view>& out,
                 std::vector<Regex::Match>& matches) {
  // (start, end, is_match) segments covering `s`, as the Python library's Pattern::find_matches builds them.
  struct Seg { size_t a, b; bool m; };
  std::vector<Seg> segs;
  matches.clear();
  st.regex->find_all(s, matches);
  size_t prev = 0;
  for (const auto& m : matches) {
    if (prev != m.start) segs.push_back({prev, m.start, false});
    segs.push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != s.size()) segs.push_back({prev, s.size(), false});
  if (st.invert) for (auto& g : segs) g.m = !g.m;

  auto emit = [&](size_t a, size_t b) { if (b > a) out.push_back(s.substr(a, b - a)); };
  switch (st.behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& g : segs) if (!g.m) emit(g.a, g.b);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& g : segs) emit(g.a, g.b);
      break;
    case SplitBehavior::kMergedWithPrevious: {  // a match joins the piece before it
      size_t start = 0;
      bool open = false;
      for (const auto& g : segs) {
        if (g.m && open) { emit(start, g.b); open = false; }
        else if (g.m) emit(g.a, g.b);
        else { if (open) emit(start, g.a); start = g.a; open = true; }
      }
      if (open) emit(start, s.size());
      break;
    }
    case SplitBehavior::kMergedWithNext: {  // a match joins the piece after it
      size_t start = 0;
      bool open = false;
      for (const auto& g : segs) {
        if (g.m) { if (open) emit(start, g.a); start = g.a; open = true; }
        else if (open) { emit(start, g.b); open = false; }
        else emit(g.a, g.b);
      }
      if (open) emit(start, s.size());
      break;
    }
    case SplitBehavior::kContiguous: {  // runs of matches become one piece
      size_t start = 0;
      bool run = false;
      for (const auto& g : segs) {
        if (g.m) { if (!run) start = g.a; run = true; }
        else { if (run) emit(start, g.a); run = false; emit(g.a, g.b); }
      }
      if (run) emit(start, s.size());
      break;
    }
  }
}

}  // namespace

void PreTokenizer::run(std::string_view text, std::vector<std::string_view>& out,
                       std::deque<std::string>& arena) const {
  std::vector<std::string_view> cur, next;
  std::vector<Regex::Match> matches;
  if (!text.empty()) cur.push_back(text);
  for (const auto& st : steps_) {
    next.clear();
    for (std::string_view piece : cur) {
      if (st.kind == PreTokenizerStep::Kind::kSplit) {
        split_piece(st, piece, next, matches);
        continue;
      }
      // ByteLevel: optional prefix space, then optional GPT-2 split (the byte mapping happens in the model).
      if (st.add_prefix_space && piece[0] != ' ') {
        arena.push_back(" ");
        arena.back().append(piece);
        piece = arena.back();
      }
      if (st.regex) split_piece(st, piece, next, matches);
      else next.push_back(piece);
    }
    std::swap(cur, next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace anvil

namespace anvil {

void PreTokenizer::add(const nlohmann::json& j, const std::string& file, const std::string& fpath) {
  using namespace jsonf;
  std::string type = get_string(j, "type", file, fpath + ".type");
  if (type == "Sequence") {
    const auto& list = get_array(j, "pretokenizers", file, fpath + ".pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) add(list[i], file, str(fpath, ".pretokenizers[", i, "]"));
    return;
  }
  PreTokenizerStep st;
  if (type == "Split") {
    st.kind = PreTokenizerStep::Kind::kSplit;
    const auto& pat = field(j, "pattern", file, fpath + ".pattern");
    if (pat.contains("Regex")) st.regex = std::make_shared<Regex>(get_string(pat, "Regex", file, fpath + ".pattern.Regex"),
                                                                  false, file + " " + fpath + ".pattern");
    else st.regex = std::make_shared<Regex>(get_string(pat, "String", file, fpath + ".pattern.String"), true,
                                            file + " " + fpath + ".pattern");
    std::string b = get_string(j, "behavior", file, fpath + ".behavior");
    if (b == "Removed") st.behavior = SplitBehavior::kRemoved;
    else if (b == "Isolated") st.behavior = SplitBehavior::kIsolated;
    else if (b == "MergedWithPrevious") st.behavior = SplitBehavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") st.behavior = SplitBehavior::kMergedWithNext;
    else if (b == "Contiguous") st.behavior = SplitBehavior::kContiguous;
    else ANVIL_THROW(file, str("field '", fpath, ".behavior' to be Removed, Isolated, MergedWithPrevious, "
                               "MergedWithNext or Contiguous"), b);
    st.invert = get_bool(j, "invert", false, file, fpath + ".invert");
  } else if (type == "ByteLevel") {
    if (byte_level_) ANVIL_THROW(file, str("one ByteLevel pre-tokenizer, last (", fpath, ")"), "a second one");
    st.kind = PreTokenizerStep::Kind::kByteLevel;
    st.add_prefix_space = get_bool(j, "add_prefix_space", true, file, fpath + ".add_prefix_space");
    if (get_bool(j, "use_regex", true, file, fpath + ".use_regex")) {
      static const auto gpt2 = std::make_shared<Regex>(kGpt2Pattern, false, "GPT-2 pattern");
      st.regex = gpt2;
    }
    byte_level_ = true;
  } else {
    ANVIL_THROW(file, str("field '", fpath, ".type' to be Sequence, Split or ByteLevel (byte-level BPE)"), type);
  }
  if (byte_level_ && st.kind != PreTokenizerStep::Kind::kByteLevel)
    ANVIL_THROW(file, str("ByteLevel to be the last pre-tokenizer (", fpath, " follows it)"), type);
  steps_.push_back(std::move(st));
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& file) {
  PreTokenizer p;
  if (!j.is_null()) p.add(j, file, "pre_tokenizer");
  return p;
}

nlohmann::json PreTokenizer::style_json(const std::string& style) {
  using json = nlohmann::json;
  if (style == "llama3") {
    return json{{"type", "Sequence"},
                {"pretokenizers",
                 json::array({json{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}},
                                   {"behavior", "Isolated"}, {"invert", false}},
                              json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                   {"use_regex", false}}})}};
  }
  if (style == "neox") {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  }
  ANVIL_THROW("train_bpe", "style 'llama3' or 'neox'", style);
}

}  // namespace anvil
