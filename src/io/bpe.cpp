#include "io/bpe.h"

#include <queue>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "io/unicode.h"

namespace anvil {

BpeModel BpeModel::from_json(const nlohmann::json& m, const std::string& file) {
  using namespace jsonf;
  std::string type = m.contains("type") ? get_string(m, "type", file, "model.type") : "BPE";
  if (type != "BPE") ANVIL_THROW(file, "field 'model.type' to be BPE (byte-level BPE)", type);
  // Options this engine does not implement are refused rather than silently mis-tokenized.
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(k);
    if (it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      ANVIL_THROW(file, str("field 'model.", k, "' to be null (not supported)"), it->dump());
  }
  if (get_bool(m, "byte_fallback", false, file, "model.byte_fallback"))
    ANVIL_THROW(file, "field 'model.byte_fallback' to be false (not supported; byte-level BPE needs none)", "true");
  // model.dropout is ignored: it is a training-time augmentation and inference is deterministic.

  BpeModel b;
  const auto& vocab = field(m, "vocab", file, "model.vocab");
  if (!vocab.is_object()) ANVIL_THROW(file, "field 'model.vocab' to be an object {token: id}", vocab.type_name());
  b.vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
      ANVIL_THROW(file, str("field 'model.vocab[\"", it.key(), "\"]' to be a non-negative int32 id"), it.value().dump());
    int32_t id = it.value().get<int32_t>();
    b.vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  b.id_to_token_.resize(size_t(max_id + 1));
  for (const auto& [tok, id] : b.vocab_) b.id_to_token_[size_t(id)] = tok;

  const auto& merges = get_array(m, "merges", file, "model.merges");
  b.merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string a, c;
    if (e.is_string()) {  // "a b": byte-level tokens never hold a plain space, so one space separates
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        ANVIL_THROW(file, str("field 'model.merges[", r, "]' to be \"left right\""), e.dump());
      a = s.substr(0, sp);
      c = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      c = e[1].get<std::string>();
    } else {
      ANVIL_THROW(file, str("field 'model.merges[", r, "]' to be \"left right\" or [left, right]"), e.dump());
    }
    auto ia = b.vocab_.find(a), ic = b.vocab_.find(c), in = b.vocab_.find(a + c);
    if (ia == b.vocab_.end() || ic == b.vocab_.end() || in == b.vocab_.end())
      ANVIL_THROW(file, str("field 'model.merges[", r, "]' to name tokens of model.vocab"),
                  str(e.dump(), " (", ia == b.vocab_.end() ? a : ic == b.vocab_.end() ? c : a + c, " missing)"));
    // A repeated pair takes its last rank, as in the Python library (its merge map is built in file order).
    b.merges_[key(ia->second, ic->second)] = Merge{int32_t(r), in->second};
  }

  const auto& unk = m.contains("unk_token") ? m["unk_token"] : nlohmann::json();
  if (!unk.is_null()) {
    if (!unk.is_string()) ANVIL_THROW(file, "field 'model.unk_token' to be a string or null", unk.type_name());
    auto it = b.vocab_.find(unk.get<std::string>());
    if (it == b.vocab_.end()) ANVIL_THROW(file, "field 'model.unk_token' to be in model.vocab", unk.dump());
    b.unk_id_ = it->second;
  }
  const auto& bl = unicode::byte_level_map();
  for (auto& v : b.byte_id_) v = -1;
  std::string bytes;
  for (const auto& [tok, id] : b.vocab_) {
    bytes.clear();
    if (!bl.decode(tok, bytes)) continue;
    b.byte_vocab_[bytes] = id;
    if (bytes.size() == 1) b.byte_id_[static_cast<unsigned char>(bytes[0])] = id;
  }
  b.fuse_unk_ = get_bool(m, "fuse_unk", false, file, "model.fuse_unk");
  b.ignore_merges_ = get_bool(m, "ignore_merges", false, file, "model.ignore_merges");
  return b;
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || id_to_token_[size_t(id)].empty()) return nullptr;
  return &id_to_token_[size_t(id)];
}

void BpeModel::encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_->mu);
    auto it = cache_->words.find(word);
    if (it != cache_->words.end()) { out.insert(out.end(), it->second.begin(), it->second.end()); return; }
  }
  size_t first = out.size();
  const StrMap& v = byte_level ? byte_vocab_ : vocab_;
  auto it = ignore_merges_ ? v.find(word) : v.end();
  if (it != v.end()) out.push_back(it->second);  // the word is a token: Llama 3 does not merge it
  else merge_word(word, byte_level, out);
  if (cacheable) {
    std::unique_lock lock(cache_->mu);
    // A full cache stops growing (as in the Python library): bounded memory on endless random text.
    if (cache_->words.size() < kCacheCapacity)
      cache_->words.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

// Symbols form a linked list over the word's characters; a min-heap holds candidate merges ordered by
// (rank, position), so the lowest-ranked pair merges first and ties go to the leftmost one. Entries that
// went stale (a neighbour merged meanwhile) are skipped when popped.
void BpeModel::merge_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  struct Sym { int32_t id; int32_t prev, next; bool alive; };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  for (size_t i = 0; i < word.size();) {
    size_t len = byte_level ? 1 : std::min(size_t(unicode::utf8_len(p[i])), word.size() - i);
    int32_t known = -1;
    if (byte_level) {
      known = byte_id_[p[i]];
    } else {
      auto it = vocab_.find(word.substr(i, len));
      if (it != vocab_.end()) known = it->second;
    }
    i += len;
    int32_t id = known >= 0 ? known : unk_id_;
    if (id < 0) continue;  // no unk token: the character is dropped, as the Python library does
    if (known < 0 && fuse_unk_ && !syms.empty() && syms.back().id == unk_id_) continue;
    syms.push_back({id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1, true});
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  struct Cand { int32_t rank, pos, new_id; };
  auto worse = [](const Cand& x, const Cand& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
  std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
  auto push = [&](int32_t pos) {
    int32_t nx = syms[size_t(pos)].next;
    if (nx < 0) return;
    auto it = merges_.find(key(syms[size_t(pos)].id, syms[size_t(nx)].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& s = syms[size_t(c.pos)];
    if (!s.alive || s.next < 0) continue;
    Sym& n = syms[size_t(s.next)];
    auto it = merges_.find(key(s.id, n.id));
    if (it == merges_.end() || it->second.rank != c.rank || it->second.new_id != c.new_id) continue;  // stale
    s.id = c.new_id;
    n.alive = false;
    s.next = n.next;
    if (s.next >= 0) syms[size_t(s.next)].prev = c.pos;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) out.push_back(syms[size_t(i)].id);
}

}  // namespace anvil
