#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "train/fs_util.h"

namespace anvil {

MetricsLog::MetricsLog(std::string path, int64_t keep_until) : path_(std::move(path)) {
  std::string kept;
  if (keep_until >= 0 && std::filesystem::exists(path_)) {
    std::istringstream in(read_file_bytes(path_));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (row.is_discarded() || !row.contains("step")) continue;  // a line cut short by a crash
      if (row["step"].get<int64_t>() > keep_until) continue;
      remember(row);
      kept += line + "\n";
    }
  }
  write_file_atomic(path_, kept);
  f_ = std::fopen(path_.c_str(), "ab");
  ANVIL_CHECK(f_, "metrics", str("a writable file '", path_, "'"), std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::remember(const nlohmann::json& row) {
  int64_t step = row["step"].get<int64_t>();
  if (row.contains("loss")) train_.emplace_back(step, row["loss"].get<double>());
  if (row.contains("val_loss")) val_.emplace_back(step, row["val_loss"].get<double>());
}

void MetricsLog::append(const nlohmann::json& row) {
  std::string line = row.dump() + "\n";
  write_all(f_, line.data(), line.size(), path_);
  ANVIL_CHECK(std::fflush(f_) == 0, "metrics", str("'", path_, "' written"), std::strerror(errno));
  remember(row);
}

}  // namespace anvil
