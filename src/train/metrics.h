// Training metrics: out_dir/metrics.jsonl, one JSON object per optimizer step
//   {"step": 120, "loss": 3.214, "lr": 0.00029, "grad_norm": 0.83, "tokens_per_s": 41234.5, "val_loss": 3.30}
// (val_loss only on evaluation steps), and the loss curves kept in memory for the SVG plot.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace anvil {

using Curve = std::vector<std::pair<int64_t, double>>;  // (step, value)

class MetricsLog {
 public:
  // keep_until < 0: start a new file. Otherwise (resuming from that step) keep the rows with step <= keep_until
  // from an existing file, so the log continues without the steps of the interrupted tail.
  MetricsLog(std::string path, int64_t keep_until);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void append(const nlohmann::json& row);  // written and flushed at once
  const Curve& train() const { return train_; }
  const Curve& val() const { return val_; }
  const std::string& path() const { return path_; }

 private:
  void remember(const nlohmann::json& row);
  std::string path_;
  std::FILE* f_ = nullptr;
  Curve train_, val_;
};

}  // namespace anvil
