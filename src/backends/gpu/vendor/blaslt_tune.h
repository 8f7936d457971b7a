// ANVIL_BLASLT_TUNE, the cuBLASLt tuning knob (cuda_blaslt.cu), parsed in plain C++ so the CPU tests check it: the
// products that read it run only on a CUDA GPU.
//   unset or ""  products of at most kTuneMaxRows activation rows are timed over the heuristic's candidates
//   "0"          none: the heuristic's first answer
//   "all"        every product
//   "log"        as unset, and each tuning prints its times to stderr
// Anything else is an error naming the variable, the values it takes and the value it got.
#pragma once
#include <string>

#include "core/error.h"

namespace anvil::gpu {

struct BlasltTune {
  bool skinny_only;  // time the products of at most kTuneMaxRows rows
  bool all;          // time every product
  bool log;          // print each tuning's times
};

// value: the variable's value, or null when it is unset.
inline BlasltTune parse_blaslt_tune(const char* value) {
  const std::string v = value ? value : "";
  ANVIL_CHECK(v.empty() || v == "0" || v == "all" || v == "log", "cuBLASLt tuning",
              "ANVIL_BLASLT_TUNE unset, 0, all or log", str("'", v, "'"));
  return BlasltTune{v.empty() || v == "log", v == "all", v == "log"};
}

}  // namespace anvil::gpu
