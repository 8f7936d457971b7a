// decode_stack's phase trace (ANVIL_DECODE_STACK_TRACE=1): each block's thread 0 stamps the end of every phase of
// every layer, and the host prints where a step's time goes (eager steps only: it synchronises to read the stamps).
// A phase that follows a hand-off includes the wait for its tagged inputs (the norms, the attention, the stagings).
#pragma once
#include "core/tensor.h"

namespace anvil::decode_stack_trace {

constexpr int kStamps = 13;  // phases a layer; their names: decode_stack_trace.cpp

// stamps: i64 (L * kStamps + 1) * grid globaltimer ns on the host, [(l, k, b)] the end of phase k of layer l on
// block b, then each block's start; launch_us: the launch's time between events. Prints to stderr.
void print(const Tensor& stamps, int L, int grid, double launch_us);

}  // namespace anvil::decode_stack_trace
