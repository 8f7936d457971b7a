#include <gtest/gtest.h>

#include <cmath>

#include "train/loss_plot.h"

using namespace anvil;

namespace {

// A minimal XML well-formedness check: one root, every tag closed in order, attributes quoted, no stray '<'
// or '&' in text. Enough to catch what a hand-written SVG writer gets wrong.
std::string xml_error(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&') {
        size_t semi = s.find(';', i);
        std::string ent = s.substr(i, semi - i + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;") return "bad entity at " + std::to_string(i);
      }
      if (stack.empty() && !std::isspace((unsigned char)s[i])) return "text outside the root at " + std::to_string(i);
      i++;
      continue;
    }
    size_t end = s.find('>', i);
    if (end == std::string::npos) return "unclosed tag";
    std::string tag = s.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside a tag at " + std::to_string(i);
    if (std::count(tag.begin(), tag.end(), '"') % 2) return "unbalanced quotes in <" + tag + ">";
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      stack.pop_back();
    } else {
      std::string name = tag.substr(0, tag.find_first_of(" \n/"));
      if (stack.empty()) roots++;
      if (tag.back() != '/') stack.push_back(name);
    }
    i = end + 1;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return "";
}

}  // namespace

TEST(LossPlot, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 1000), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(nice_ticks(2.37, 7.9, 5), (std::vector<double>{2, 3, 4, 5, 6, 7, 8}));
  auto t = nice_ticks(3.1, 3.1);
  EXPECT_LE(t.front(), 3.1);
  EXPECT_GE(t.back(), 3.1);
}

TEST(LossPlot, SvgIsWellFormedWithAxesCurvesAndLabels) {
  Curve train, val;
  for (int s = 1; s <= 5000; s++) train.emplace_back(s, 2 + 6 * std::exp(-s / 800.0));
  for (int s = 500; s <= 5000; s += 500) val.emplace_back(s, 2.2 + 6 * std::exp(-s / 800.0));
  std::string svg = loss_svg(train, val, "loss: runs/<a&b>");
  EXPECT_EQ(xml_error(svg), "") << svg.substr(0, 400);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_LT(svg.size(), 40000u) << "5000 points are thinned to <= 1500";
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">validation loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">5000</text>"), std::string::npos) << "x tick labels";
  EXPECT_NE(svg.find("&lt;a&amp;b&gt;"), std::string::npos) << "the title is escaped";
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) polylines++;
  EXPECT_EQ(polylines, 2u);
  // Degenerate inputs still make a valid document.
  EXPECT_EQ(xml_error(loss_svg({}, {}, "empty")), "");
  EXPECT_EQ(xml_error(loss_svg({{1, 3.0}}, {}, "one point")), "");
  EXPECT_EQ(xml_error(loss_svg({{1, 3.0}, {2, NAN}}, {}, "nan")), "");
}
