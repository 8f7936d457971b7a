// Human-readable numbers for progress lines, and a one-line progress bar on stderr.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace anvil {

std::string human_count(double x);     // 950 → "950", 41234 → "41.2k", 1.234e6 → "1.23M", 3e9 → "3.00G"
std::string human_duration(double s);  // 42 → "42s", 192 → "3m12s", 7380 → "2h03m"
std::string human_bytes(double b);     // decimal units: 12.3e6 → "12.3 MB"

// Redraws one line ("\r") at most 10 times a second when stderr is a terminal; otherwise prints only the
// final line, so logs stay readable.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled = true);
  void update(uint64_t done_bytes, int64_t tokens);
  void finish(uint64_t done_bytes, int64_t tokens);

 private:
  void draw(uint64_t done, int64_t tokens, bool last);
  std::string label_;
  uint64_t total_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace anvil
