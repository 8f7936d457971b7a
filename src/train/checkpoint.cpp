#include "train/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "train/fs_util.h"

namespace anvil {

namespace fs = std::filesystem;

std::string checkpoint_name(int64_t step) { return "checkpoint-" + std::to_string(step); }

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return out;
  for (auto& e : fs::directory_iterator(out_dir)) {
    std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("checkpoint-", 0) != 0) continue;
    std::string digits = n.substr(11);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoll(digits), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string latest_checkpoint(const std::string& out_dir) {
  fs::path p = fs::path(out_dir) / "latest";
  if (!fs::exists(p)) return "";
  std::string name = read_file_bytes(p.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  fs::path dir = fs::path(out_dir) / name;
  ANVIL_CHECK(!name.empty() && fs::is_directory(dir), "checkpoint", str("'", p.string(), "' naming a checkpoint directory"),
              str("'", name, "'"));
  return dir.string();
}

std::string resolve_resume(const std::string& arg, const std::string& out_dir) {
  if (arg == "auto") return latest_checkpoint(out_dir);
  ANVIL_CHECK(fs::is_directory(arg), "resume", "a checkpoint directory or \"auto\"", str("'", arg, "'"));
  if (!fs::exists(fs::path(arg) / "trainer_state.json") && fs::exists(fs::path(arg) / "latest"))
    return latest_checkpoint(arg);
  ANVIL_CHECK(fs::exists(fs::path(arg) / "trainer_state.json"), "resume",
              "a checkpoint directory (with trainer_state.json)", str("'", arg, "'"));
  return arg;
}

std::string save_checkpoint(const std::string& out_dir, int64_t step, int64_t keep,
                            const std::function<void(const std::string&)>& write) {
  fs::create_directories(out_dir);
  const std::string name = checkpoint_name(step);
  const fs::path final_dir = fs::path(out_dir) / name;
  const fs::path tmp = fs::path(out_dir) / ("." + name + tmp_suffix());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directory(tmp);
    write(tmp.string());
    fsync_tree(tmp.string());
    // Saving the same step again (a resumed run interrupted at once): the old copy moves aside first and is
    // deleted only after the new one is in place.
    fs::path old;
    if (fs::is_directory(final_dir)) {
      old = fs::path(out_dir) / ("." + name + ".old" + tmp_suffix());
      fs::rename(final_dir, old);
    }
    if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
      int e = errno;
      if (!old.empty()) fs::rename(old, final_dir, ec);
      ANVIL_THROW("checkpoint", str("'", tmp.string(), "' renamed to '", final_dir.string(), "'"), std::strerror(e));
    }
    if (!old.empty()) fs::remove_all(old, ec);
    fsync_path(out_dir);
    write_file_atomic((fs::path(out_dir) / "latest").string(), name + "\n");
  } catch (const std::exception& e) {
    fs::remove_all(tmp, ec);
    ANVIL_THROW("checkpoint", str("'", final_dir.string(), "' written"),
                str("a failure: ", e.what(), " (earlier checkpoints are untouched)"));
  }
  auto all = list_checkpoints(out_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); i++)
    if (all[i].first != step) fs::remove_all(all[i].second, ec);
  return final_dir.string();
}

}  // namespace anvil
