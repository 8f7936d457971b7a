#include "train/dataset.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/fs_util.h"

namespace anvil {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string tokenizer_id_hex(uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, id);
  return buf;
}

DatasetMeta read_dataset_meta(const std::string& dir) {
  std::string path = (fs::path(dir) / "meta.json").string();
  ANVIL_CHECK(fs::exists(path), "dataset", str("a prepared dataset directory with meta.json (run `anvil prepare`)"),
              str("no '", path, "'"));
  DatasetMeta m;
  try {
    json j = json::parse(read_file_bytes(path));
    ANVIL_CHECK(j.value("format", "") == "anvil-tokens", "dataset", "format \"anvil-tokens\"",
                str(j.value("format", "(none)"), " in '", path, "'"));
    ANVIL_CHECK(j.value("version", 0) == 1, "dataset", "version 1", str(j.value("version", 0), " in '", path, "'"));
    m.tokenizer_id = std::stoull(j.at("tokenizer_id").get<std::string>(), nullptr, 16);
    m.vocab_size = j.at("vocab_size").get<uint32_t>();
    m.eos_id = j.at("eos_id").get<int32_t>();
    for (auto& [name, s] : j.at("splits").items()) {
      SplitMeta sm;
      sm.shards = s.at("shards").get<std::vector<std::string>>();
      sm.tokens = s.at("tokens").get<int64_t>();
      sm.docs = s.at("docs").get<int64_t>();
      m.splits[name] = sm;
    }
  } catch (const json::exception& e) {
    ANVIL_THROW("dataset", "a valid meta.json", str("'", path, "': ", e.what()));
  } catch (const std::logic_error& e) {  // stoull
    ANVIL_THROW("dataset", "a hexadecimal tokenizer_id", str("'", path, "': ", e.what()));
  }
  return m;
}

void write_dataset_meta(const std::string& dir, const DatasetMeta& m) {
  json splits = json::object();
  for (auto& [name, s] : m.splits)
    splits[name] = {{"shards", s.shards}, {"tokens", s.tokens}, {"docs", s.docs}};
  json j = {{"format", "anvil-tokens"}, {"version", 1}, {"tokenizer_id", tokenizer_id_hex(m.tokenizer_id)},
            {"vocab_size", m.vocab_size}, {"eos_id", m.eos_id}, {"splits", splits}};
  write_file_atomic((fs::path(dir) / "meta.json").string(), j.dump(2) + "\n");
}

TokenStream::TokenStream(const std::string& dir, const std::string& split) : dir_(dir), meta_(read_dataset_meta(dir)) {
  auto it = meta_.splits.find(split);
  if (it == meta_.splits.end()) return;
  for (auto& name : it->second.shards) {
    TokenShard s((fs::path(dir) / name).string());
    const ShardInfo& in = s.info();
    ANVIL_CHECK(in.tokenizer_id == meta_.tokenizer_id && in.vocab_size == meta_.vocab_size && in.eos_id == meta_.eos_id,
                "dataset", str("shards made with tokenizer ", tokenizer_id_hex(meta_.tokenizer_id), " (vocab ",
                               meta_.vocab_size, ", eos ", meta_.eos_id, ") as meta.json says"),
                str("'", s.path(), "' with tokenizer ", tokenizer_id_hex(in.tokenizer_id), " (vocab ", in.vocab_size,
                    ", eos ", in.eos_id, ")"));
    offsets_.push_back(offsets_.back() + s.size());
    shards_.push_back(std::move(s));
  }
}

void TokenStream::read(int64_t start, int64_t n, int32_t* out) const {
  ANVIL_CHECK(start >= 0 && n >= 0 && start + n <= size(), "TokenStream::read", str("a range within [0, ", size(), ")"),
              str("[", start, ", ", start + n, ")"));
  // The shard holding `start`: the last offset <= start.
  size_t i = size_t(std::upper_bound(offsets_.begin(), offsets_.end(), start) - offsets_.begin()) - 1;
  while (n > 0) {
    int64_t local = start - offsets_[i], take = std::min(n, shards_[i].size() - local);
    shards_[i].read(local, take, out);
    out += take;
    start += take;
    n -= take;
    i++;
  }
}

}  // namespace anvil
