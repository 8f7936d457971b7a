#include "io/tokenizer.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/added_tokens.h"
#include "io/bpe.h"
#include "io/json_fields.h"
#include "io/pretokenizer.h"
#include "io/unicode.h"

namespace anvil {

using json = nlohmann::json;
using namespace jsonf;

struct Tokenizer::Impl {
  std::string file;
  BpeModel model;
  AddedTokens added;
  PreTokenizer pre;
  bool has_template = false;
  std::vector<std::vector<int32_t>> template_single;  // an empty entry stands for the sequence ($A)
  bool byte_level_decoder = false;
  std::vector<std::string> token_bytes;  // per id: what decode() emits (byte-level decoded)
  std::vector<uint8_t> known;            // per id: 1 when some token has this id
  int32_t vocab_size = 0, bos = -1, eos = -1;

  void load_post_processor(const json& j, const std::string& fpath);
};

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ANVIL_THROW("Tokenizer::from_file", str("a readable tokenizer.json at '", path, "'"), "cannot open file");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

void Tokenizer::Impl::load_post_processor(const json& j, const std::string& fpath) {
  if (j.is_null()) return;
  std::string type = get_string(j, "type", file, fpath + ".type");
  if (type == "Sequence") {
    const auto& list = get_array(j, "processors", file, fpath + ".processors");
    for (size_t i = 0; i < list.size(); ++i) load_post_processor(list[i], str(fpath, ".processors[", i, "]"));
  } else if (type == "ByteLevel") {
    // Only adjusts offsets (trim_offsets); ids are unchanged.
  } else if (type == "TemplateProcessing") {
    const auto& specials = field(j, "special_tokens", file, fpath + ".special_tokens");
    const auto& single = get_array(j, "single", file, fpath + ".single");
    has_template = true;
    template_single.clear();
    for (size_t i = 0; i < single.size(); ++i) {
      std::string f = str(fpath, ".single[", i, "]");
      if (single[i].contains("Sequence")) {
        std::string id = get_string(single[i]["Sequence"], "id", file, f + ".Sequence.id");
        if (id != "A") ANVIL_THROW(file, str("field '", f, ".Sequence.id' to be A in a single template"), id);
        template_single.emplace_back();
      } else if (single[i].contains("SpecialToken")) {
        std::string name = get_string(single[i]["SpecialToken"], "id", file, f + ".SpecialToken.id");
        const auto& ids = get_array(field(specials, name.c_str(), file, fpath + ".special_tokens." + name), "ids",
                                    file, fpath + ".special_tokens." + name + ".ids");
        std::vector<int32_t> v;
        for (const auto& x : ids) v.push_back(x.get<int32_t>());
        if (v.empty()) ANVIL_THROW(file, str("field '", fpath, ".special_tokens.", name, ".ids' to be non-empty"), "[]");
        template_single.push_back(v);
      } else {
        ANVIL_THROW(file, str("field '", f, "' to be a Sequence or a SpecialToken"), single[i].dump());
      }
    }
  } else {
    ANVIL_THROW(file, str("field '", fpath, ".type' to be TemplateProcessing, ByteLevel or Sequence"), type);
  }
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::string text = read_file(path);
  return from_json_string(text, path);
}

Tokenizer Tokenizer::from_json_string(std::string_view json_text, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;
  t.file = origin;
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    ANVIL_THROW(origin, "valid JSON (a tokenizer.json)", e.what());
  }
  if (!j.is_object()) ANVIL_THROW(origin, "a JSON object (a tokenizer.json)", j.type_name());
  t.model = BpeModel::from_json(field(j, "model", origin, "model"), origin);

  // Missing pipeline stages count as null, as in the Python library; only the model is required.
  const json none;
  const json& norm = j.contains("normalizer") ? j["normalizer"] : none;
  if (!norm.is_null()) {
    std::string type = get_string(norm, "type", origin, "normalizer.type");
    bool empty_seq = type == "Sequence" && norm.contains("normalizers") && norm["normalizers"].empty();
    if (type != "NFC" && !empty_seq)
      ANVIL_THROW(origin, "field 'normalizer' to be null or NFC (byte-level BPE)", type);
  }
  t.pre = PreTokenizer::from_json(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : none, origin);
  t.added = AddedTokens::from_json(j.contains("added_tokens") ? j["added_tokens"] : json::array(), origin);
  t.load_post_processor(j.contains("post_processor") ? j["post_processor"] : none, "post_processor");

  const json& dec = j.contains("decoder") ? j["decoder"] : none;
  if (!dec.is_null()) {
    std::string type = get_string(dec, "type", origin, "decoder.type");
    if (type != "ByteLevel") ANVIL_THROW(origin, "field 'decoder.type' to be ByteLevel or null", type);
    t.byte_level_decoder = true;
  }

  t.vocab_size = std::max(t.model.size(), t.added.max_id() + 1);
  t.token_bytes.assign(size_t(t.vocab_size), std::string());
  t.known.assign(size_t(t.vocab_size), 0);
  const auto& bl = unicode::byte_level_map();
  for (int32_t id = 0; id < t.vocab_size; ++id) {
    const std::string* tok = t.added.content(id);
    if (!tok) tok = t.model.id_to_token(id);
    if (!tok) continue;
    t.known[size_t(id)] = 1;
    // The ByteLevel decoder maps a token's characters back to bytes, or keeps the token's own UTF-8 when
    // one of its characters is outside the byte alphabet (added tokens like "<|eot_id|>" map to themselves).
    if (!t.byte_level_decoder || !bl.decode(*tok, t.token_bytes[size_t(id)])) t.token_bytes[size_t(id)] = *tok;
  }

  // bos: the template's leading special token, else a well-known name; eos: well-known names.
  if (t.has_template && !t.template_single.empty() && t.template_single[0].size() == 1)
    t.bos = t.template_single[0][0];
  for (const char* name : {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>"}) {
    if (t.bos >= 0) break;
    t.bos = t.added.id(name);
  }
  for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"}) {
    if (t.eos >= 0) break;
    t.eos = t.added.id(name);
  }
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  size_t bad = unicode::utf8_find_invalid(text);
  if (bad != std::string_view::npos)
    ANVIL_THROW("Tokenizer::encode", "valid UTF-8 text", str("an invalid byte sequence at offset ", bad));
  std::vector<AddedTokens::Segment> segs;
  t.added.split(text, segs);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  for (const auto& s : segs) {
    if (s.id >= 0) { ids.push_back(s.id); continue; }
    pieces.clear();
    t.pre.run(s.text, pieces, arena);
    for (std::string_view p : pieces) t.model.encode_word(p, t.pre.byte_level(), ids);
  }
  if (!add_special_tokens || !t.has_template) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const auto& item : t.template_single) {
    if (item.empty()) out.insert(out.end(), ids.begin(), ids.end());
    else out.insert(out.end(), item.begin(), item.end());
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  StreamDecoder d(*this, skip_special_tokens);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  return out + d.flush();
}

const std::string& Tokenizer::decode_token(int32_t id) const {
  static const std::string empty;
  if (id < 0 || id >= impl_->vocab_size) return empty;
  return impl_->token_bytes[size_t(id)];
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  int32_t id = impl_->added.id(token);
  return id >= 0 ? id : impl_->model.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const std::string* s = impl_->added.content(id)) return *s;
  if (const std::string* s = impl_->model.id_to_token(id)) return *s;
  return "";
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
bool Tokenizer::is_special(int32_t id) const { return impl_->added.is_special(id); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }

void Tokenizer::set_bos_id(int32_t id) {
  ANVIL_CHECK(id >= -1 && id < impl_->vocab_size, "Tokenizer::set_bos_id", str("-1 or an id < ", impl_->vocab_size), id);
  impl_->bos = id;
}
void Tokenizer::set_eos_id(int32_t id) {
  ANVIL_CHECK(id >= -1 && id < impl_->vocab_size, "Tokenizer::set_eos_id", str("-1 or an id < ", impl_->vocab_size), id);
  impl_->eos = id;
}

std::vector<int32_t> Tokenizer::stop_ids() const {
  std::vector<int32_t> v;
  if (impl_->eos >= 0) v.push_back(impl_->eos);
  for (const char* name : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>"}) {
    int32_t id = impl_->added.id(name);
    if (id >= 0 && std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
  }
  return v;
}

std::string Tokenizer::apply_chat_template_llama3(const std::vector<ChatMessage>& messages,
                                                  bool add_generation_prompt) const {
  for (const char* name : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
    ANVIL_CHECK(impl_->added.id(name) >= 0, "Tokenizer::apply_chat_template_llama3",
                str("a Llama 3 tokenizer with the special token ", name), str(impl_->file, " lacks it"));
  // Jinja's `trim` in the Llama 3 template strips leading and trailing whitespace of each content.
  auto trim = [](const std::string& s) {
    const char* ws = " \t\n\r\f\v";
    size_t a = s.find_first_not_of(ws);
    if (a == std::string::npos) return std::string();
    return s.substr(a, s.find_last_not_of(ws) - a + 1);
  };
  std::string out = "<|begin_of_text|>";
  for (const auto& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& t = *tok_->impl_;
  if (id < 0 || id >= t.vocab_size || !t.known[size_t(id)]) return "";
  if (skip_special_ && t.added.is_special(id)) return "";
  if (!t.byte_level_decoder) {  // no decoder: the Python library joins the tokens with spaces
    std::string out = first_ ? "" : " ";
    first_ = false;
    return out + t.token_bytes[size_t(id)];
  }
  pending_ += t.token_bytes[size_t(id)];
  // Emit every complete character (or invalid run, as U+FFFD); hold back a valid but unfinished tail.
  const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
  size_t i = 0, n = pending_.size();
  std::string out;
  while (i < n) {
    unicode::Utf8Step st = unicode::utf8_step(p + i, n - i);
    if (st.status == unicode::Utf8Status::kIncomplete) break;
    if (st.status == unicode::Utf8Status::kValid) out.append(pending_, i, size_t(st.len));
    else out += "\xEF\xBF\xBD";
    i += size_t(st.len);
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = unicode::utf8_lossy(pending_);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace anvil
