// The loss curve as a self-contained SVG line chart (hand-written, no dependencies): training loss per step,
// validation loss at its evaluation steps, axes with "nice" 1-2-5 ticks and labels, and a legend.
#pragma once
#include <string>
#include <vector>

#include "train/metrics.h"

namespace anvil {

// Ticks covering [lo, hi] at a 1, 2 or 5 × 10^k spacing, about `target` of them; the first is <= lo and the
// last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

std::string loss_svg(const Curve& train, const Curve& val, const std::string& title);
void write_loss_svg(const std::string& path, const Curve& train, const Curve& val, const std::string& title);

}  // namespace anvil
