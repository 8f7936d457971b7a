#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace anvil {

std::string human_count(double x) {
  char buf[32];
  double a = std::fabs(x);
  if (a < 1e3) std::snprintf(buf, sizeof buf, "%.0f", x);
  else if (a < 1e6) std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  else if (a < 1e9) std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2fG", x / 1e9);
  return buf;
}

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = std::lround(s);
  char buf[32];
  if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b < 1e6) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else if (b < 1e9) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  return buf;
}

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), total_(total_bytes), enabled_(enabled), tty_(::isatty(2) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ProgressBar::update(uint64_t done, int64_t tokens) {
  if (!enabled_ || !tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, tokens, false);
}

void ProgressBar::finish(uint64_t done, int64_t tokens) {
  if (enabled_) draw(done, tokens, true);
}

void ProgressBar::draw(uint64_t done, int64_t tokens, bool last) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  constexpr int kWidth = 24;
  int filled = int(frac * kWidth);
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  double rate = secs > 0 ? double(done) / secs : 0;
  std::fprintf(stderr, "%s%s [%s] %3.0f%% %s / %s | %.1f MB/s | %s tokens | %s%s", tty_ ? "\r" : "", label_.c_str(),
               bar.c_str(), frac * 100, human_bytes(double(done)).c_str(), human_bytes(double(total_)).c_str(),
               rate / 1e6, human_count(double(tokens)).c_str(), human_duration(secs).c_str(),
               last ? (tty_ ? "\x1b[K\n" : "\n") : "\x1b[K");
  std::fflush(stderr);
}

}  // namespace anvil
