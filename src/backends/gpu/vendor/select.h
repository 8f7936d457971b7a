// Picks the vendor spellings: the one place that switches on the compiler.
#pragma once
#if defined(__HIP__) || defined(ANVIL_HIP)
#include "backends/gpu/vendor/hip.h"
#else
#include "backends/gpu/vendor/cuda.h"
#endif
