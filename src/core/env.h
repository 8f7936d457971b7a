// Integer knobs read from the environment (A/B switches for timing): a malformed or out-of-range value is an error
// that names the variable and the range, never silently read as something else.
#pragma once
#include <cstdlib>

#include "core/error.h"

namespace anvil {

// `dflt` when `name` is unset or empty, else its value, which must be an integer in [lo, hi]; `op` names the error.
inline int env_int(const char* op, const char* name, int lo, int hi, int dflt) {
  const char* e = std::getenv(name);
  if (!e || !*e) return dflt;
  char* end = nullptr;
  const long n = std::strtol(e, &end, 10);
  ANVIL_CHECK(*end == 0 && n >= lo && n <= hi, op, str(name, ": an integer in [", lo, ", ", hi, "]"), e);
  return int(n);
}

}  // namespace anvil
