// A checkpoint as one set of tensors: a single model.safetensors or shards behind model.safetensors.index.json.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/safetensors.h"

namespace anvil {

namespace fs = std::filesystem;

// A shard name must stay inside the checkpoint directory: a crafted index must not make us map /etc/passwd.
static bool is_contained_relative(const std::string& name) {
  fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  for (const fs::path& part : p)
    if (part == "..") return false;
  return true;
}

SafetensorsIndex::SafetensorsIndex(const std::string& path) : path_(path) {
  const std::string op = str("open_checkpoint '", path, "'");
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors", ec)) p /= "model.safetensors";
    else if (fs::exists(p / "model.safetensors.index.json", ec)) p /= "model.safetensors.index.json";
    else ANVIL_THROW(op, "a directory with model.safetensors or model.safetensors.index.json", "neither file");
  } else {
    ANVIL_CHECK(fs::exists(p, ec), op, "an existing file or directory", "no such path");
  }

  if (p.extension() != ".json") {  // a single file
    shards_.push_back(std::make_shared<SafetensorsFile>(p.string()));
    names_ = shards_[0]->names();
    for (const std::string& n : names_) shard_of_[n] = 0;
    metadata_ = shards_[0]->metadata();
    return;
  }

  const std::string iop = str("safetensors index '", p.string(), "'");
  std::ifstream in(p);
  ANVIL_CHECK(in, iop, "a readable file", "cannot open it");
  std::stringstream buf;
  buf << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(buf.str());
  } catch (const nlohmann::json::exception& e) {
    ANVIL_THROW(iop, "valid JSON", str("bad JSON: ", e.what()));
  }
  ANVIL_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), iop,
              "an object with a 'weight_map' object", "no weight_map");
  if (j.contains("metadata") && j["metadata"].is_object())
    for (auto& [k, v] : j["metadata"].items()) metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();

  // Open each shard once, in file-name order; json objects iterate in sorted key order, so names_ is sorted.
  std::map<std::string, size_t> shard_index;
  std::set<std::string> files;
  for (auto& [name, file] : j["weight_map"].items()) {
    ANVIL_CHECK(file.is_string(), iop, str("a shard file name for tensor '", name, "'"), file.dump());
    ANVIL_CHECK(is_contained_relative(file.get<std::string>()), iop,
                str("a shard file inside the checkpoint directory for tensor '", name, "'"), file.dump());
    files.insert(file.get<std::string>());
  }
  for (const std::string& f : files) {
    shard_index[f] = shards_.size();
    shards_.push_back(std::make_shared<SafetensorsFile>((p.parent_path() / f).string()));
  }
  for (auto& [name, file] : j["weight_map"].items()) {
    size_t s = shard_index.at(file.get<std::string>());
    ANVIL_CHECK(shards_[s]->contains(name), iop, str("tensor '", name, "' in shard '", file.get<std::string>(), "'"),
                "no such tensor in that shard");
    shard_of_[name] = s;
    names_.push_back(name);
  }
}

const SafetensorsFile& SafetensorsIndex::shard_for(const std::string& name) const {
  auto it = shard_of_.find(name);
  ANVIL_CHECK(it != shard_of_.end(), str("checkpoint '", path_, "'"), str("a tensor named '", name, "'"),
              str("no such tensor among ", names_.size()));
  return *shards_[it->second];
}

const SafetensorsEntry& SafetensorsIndex::entry(const std::string& name) const { return shard_for(name).entry(name); }
Tensor SafetensorsIndex::get(const std::string& name) const { return shard_for(name).get(name); }
Tensor SafetensorsIndex::load(const std::string& name, Device device, DType dtype) const {
  return load_tensor(get(name), device, dtype);
}

SafetensorsIndex open_checkpoint(const std::string& path) { return SafetensorsIndex(path); }

}  // namespace anvil
