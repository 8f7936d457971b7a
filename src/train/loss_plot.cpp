#include "train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "train/fs_util.h"

namespace anvil {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide range around it
    double c = std::isfinite(lo) ? lo : 0;
    lo = c - 0.5;
    hi = c + 0.5;
  }
  double raw = (hi - lo) / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag, step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
  std::vector<double> t;
  for (double v = std::floor(lo / step) * step; v < hi + step * 0.999; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

namespace {

constexpr double kW = 800, kH = 480, kLeft = 72, kRight = 24, kTop = 44, kBottom = 56;

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// At most ~1500 points per curve: bucket means keep the file small and the trend visible on long runs.
Curve thin(const Curve& c, size_t max_points = 1500) {
  if (c.size() <= max_points) return c;
  Curve out;
  size_t per = (c.size() + max_points - 1) / max_points;
  for (size_t i = 0; i < c.size(); i += per) {
    size_t e = std::min(c.size(), i + per);
    double s = 0, y = 0;
    for (size_t k = i; k < e; k++) s += double(c[k].first), y += c[k].second;
    out.emplace_back(int64_t(s / double(e - i)), y / double(e - i));
  }
  return out;
}

}  // namespace

std::string loss_svg(const Curve& train_in, const Curve& val, const std::string& title) {
  Curve train = thin(train_in);
  double x_lo = 0, x_hi = 1, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Curve* c : std::initializer_list<const Curve*>{&train, &val})
    for (auto& [s, y] : *c) {
      x_hi = std::max(x_hi, double(s));
      if (std::isfinite(y)) y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  if (!std::isfinite(y_lo)) y_lo = 0, y_hi = 1;
  std::vector<double> xt = nice_ticks(x_lo, x_hi), yt = nice_ticks(y_lo, y_hi, 5);
  x_lo = xt.front(), x_hi = xt.back(), y_lo = yt.front(), y_hi = yt.back();
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto X = [&](double s) { return kLeft + (s - x_lo) / (x_hi - x_lo) * pw; };
  auto Y = [&](double y) { return kTop + (y_hi - y) / (y_hi - y_lo) * ph; };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH << "\" viewBox=\"0 0 " << kW
    << " " << kH << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << kW << "\" height=\"" << kH << "\" fill=\"white\"/>\n"
    << "<text x=\"" << kW / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << escape(title) << "</text>\n";
  // Grid, ticks and tick labels.
  o << "<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n";
  for (double t : xt) o << "<line x1=\"" << num(X(t)) << "\" y1=\"" << kTop << "\" x2=\"" << num(X(t)) << "\" y2=\"" << kTop + ph << "\"/>\n";
  for (double t : yt) o << "<line x1=\"" << kLeft << "\" y1=\"" << num(Y(t)) << "\" x2=\"" << kLeft + pw << "\" y2=\"" << num(Y(t)) << "\"/>\n";
  o << "</g>\n<g fill=\"#333\">\n";
  for (double t : xt)
    o << "<text x=\"" << num(X(t)) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>\n";
  for (double t : yt)
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << num(Y(t) + 4) << "\" text-anchor=\"end\">" << tick_label(t) << "</text>\n";
  o << "</g>\n";
  // Axes and their labels.
  o << "<g stroke=\"#333\" stroke-width=\"1\">\n"
    << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + ph << "\" x2=\"" << kLeft + pw << "\" y2=\"" << kTop + ph << "\"/>\n"
    << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kTop + ph << "\"/>\n";
  for (double t : xt) o << "<line x1=\"" << num(X(t)) << "\" y1=\"" << kTop + ph << "\" x2=\"" << num(X(t)) << "\" y2=\"" << kTop + ph + 5 << "\"/>\n";
  for (double t : yt) o << "<line x1=\"" << kLeft - 5 << "\" y1=\"" << num(Y(t)) << "\" x2=\"" << kLeft << "\" y2=\"" << num(Y(t)) << "\"/>\n";
  o << "</g>\n"
    << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kH - 12 << "\" text-anchor=\"middle\">step</text>\n"
    << "<text x=\"18\" y=\"" << kTop + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << kTop + ph / 2
    << ")\">loss</text>\n";
  // Curves.
  auto polyline = [&](const Curve& c, const char* color, double width) {
    if (c.empty()) return;
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width << "\" points=\"";
    for (auto& [s, y] : c)
      if (std::isfinite(y)) o << num(X(double(s))) << "," << num(Y(y)) << " ";
    o << "\"/>\n";
  };
  polyline(train, "#1f77b4", 1.5);
  polyline(val, "#d62728", 2);
  for (auto& [s, y] : val)
    if (std::isfinite(y)) o << "<circle cx=\"" << num(X(double(s))) << "\" cy=\"" << num(Y(y)) << "\" r=\"3\" fill=\"#d62728\"/>\n";
  // Legend.
  double lx = kLeft + pw - 130, ly = kTop + 12;
  o << "<g>\n<rect x=\"" << lx - 8 << "\" y=\"" << ly - 10 << "\" width=\"134\" height=\"" << (val.empty() ? 22 : 40)
    << "\" fill=\"white\" stroke=\"#ccc\"/>\n"
    << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n"
    << "<text x=\"" << lx + 30 << "\" y=\"" << ly + 4 << "\">train loss</text>\n";
  if (!val.empty())
    o << "<line x1=\"" << lx << "\" y1=\"" << ly + 18 << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly + 18
      << "\" stroke=\"#d62728\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << lx + 30 << "\" y=\"" << ly + 22 << "\">validation loss</text>\n";
  o << "</g>\n</svg>\n";
  return o.str();
}

void write_loss_svg(const std::string& path, const Curve& train, const Curve& val, const std::string& title) {
  write_file_atomic(path, loss_svg(train, val, title));
}

}  // namespace anvil
