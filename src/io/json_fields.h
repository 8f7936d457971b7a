// Typed access to tokenizer.json fields: a missing or mistyped field throws anvil::Error naming the file and
// the field's path ("model.vocab"), so a bad file says what to fix.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace anvil::jsonf {

using json = nlohmann::json;

// j[key], which must exist (null allowed only when `nullable`).
inline const json& field(const json& j, const char* key, const std::string& file, const std::string& path,
                         bool nullable = false) {
  if (!j.is_object()) ANVIL_THROW(file, str("'", path, "' to be inside an object"), j.type_name());
  auto it = j.find(key);
  if (it == j.end()) ANVIL_THROW(file, str("field '", path, "'"), "missing");
  if (!nullable && it->is_null()) ANVIL_THROW(file, str("field '", path, "' to be set"), "null");
  return *it;
}
inline std::string get_string(const json& j, const char* key, const std::string& file, const std::string& path) {
  const json& v = field(j, key, file, path);
  if (!v.is_string()) ANVIL_THROW(file, str("field '", path, "' to be a string"), v.type_name());
  return v.get<std::string>();
}
// Optional boolean: `def` when missing or null.
inline bool get_bool(const json& j, const char* key, bool def, const std::string& file, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) ANVIL_THROW(file, str("field '", path, "' to be a boolean"), it->type_name());
  return it->get<bool>();
}
inline const json& get_array(const json& j, const char* key, const std::string& file, const std::string& path) {
  const json& v = field(j, key, file, path);
  if (!v.is_array()) ANVIL_THROW(file, str("field '", path, "' to be an array"), v.type_name());
  return v;
}

}  // namespace anvil::jsonf
